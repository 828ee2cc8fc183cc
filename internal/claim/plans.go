package claim

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// genericPlansSQL has the statements after it, to the end of their
// transaction, run on generic plans.
//
// The statements of the hot path are prepared (pgx caches them per
// connection): accepting a batch of events (claimManySQL), loading a
// batch of deliveries (loadDeliveriesSQL) and ending a batch of jobs
// (lockClaimsSQL, lockRunningJobsSQL, recordAttemptsSQL, releaseSQL,
// completeJobsSQL). Under Postgres' default plan_cache_mode, auto, such a
// statement is planned anew at every run for as long as its custom plans
// look cheaper than its generic one, which for the arrays of one or a few
// rows that a light load sends is always. Planning these statements took
// longer than running them: at 20 events/s, 1.8 ms of planning against
// 0.9 ms of execution for the claim statement, and 4.9 ms of planning in
// all per event delivered, on the path from accept to downstream and on
// Postgres' CPU (docs/benchmarks.md, "Plans made at every run"). Each
// finds its rows through primary keys or ctids whatever the statistics
// say, so its generic plan is what any batch wants (plan_internal_test.go
// plans each of them generically), and it is made once per connection.
const genericPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`

// sessionPlansSQL ends genericPlansSQL's effect before its transaction
// ends, for statements that are not on the list above. RESET gives the
// session its default value, which is the value it had: hookgate never
// sets plan_cache_mode for a session (an operator may, through
// DATABASE_URL's options or the role, and that is the default RESET
// restores).
const sessionPlansSQL = `RESET plan_cache_mode`

// queueGenericPlans queues genericPlansSQL.
func queueGenericPlans(b *pgx.Batch) {
	b.Queue(genericPlansSQL).Exec(func(pgconn.CommandTag) error { return nil })
}

// queueSessionPlans queues sessionPlansSQL.
func queueSessionPlans(b *pgx.Batch) {
	b.Queue(sessionPlansSQL).Exec(func(pgconn.CommandTag) error { return nil })
}
