package claim

import (
	"context"
	"fmt"

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
// deleteJobsSQL). Under Postgres' default plan_cache_mode, auto, such a
// statement is planned anew at every run for as long as its custom plans
// look cheaper than its generic one, which for the arrays of one or a few
// rows that a light load sends is always. Planning these statements took
// longer than running them, on the path from accept to downstream and on
// Postgres' CPU (docs/benchmarks-history.md, "Plans made at every run"). Each
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

// riverCompletionCost is the random_page_cost a worker's sessions plan
// with when the server leaves the setting at Postgres' built-in default
// (4): the value Postgres' documentation gives for storage whose random
// reads cost about what sequential ones do, as the pages of a queue's
// working set, in memory, do.
//
// It is for River's completer. After a job's Work returns, River completes
// the job once more (JobSetStateIfRunningMany: its fence, a no-op for a
// job hookgate's end transaction already deleted), one statement per
// batch of a few hundred jobs, which joins river_job to the batch's ids.
// At the default cost, while river_job holds tens of thousands of rows (a
// young installation, or the backlog after an outage, which is when a
// drain is long) Postgres plans that join as two scans of the whole table,
// a large share of the database's time in a drain
// (docs/benchmarks-history.md, "River's completion planned by key"). At this cost
// it looks the ids up by the primary key. No public River API lets
// hookgate send that statement another way, and River sends it on the
// pool's connections, so the setting is the worker's sessions'. hookgate's
// own statements on the hot path keep to primary keys and ctids whatever
// the costs (plan_internal_test.go).
const riverCompletionCost = "1.1"

// workerSessionSQL gives a session riverCompletionCost, unless the server,
// the database, the role or DATABASE_URL sets random_page_cost: a value an
// operator chose is kept.
const workerSessionSQL = `SELECT set_config('random_page_cost', '` + riverCompletionCost + `', false)
FROM pg_settings WHERE name = 'random_page_cost' AND source = 'default'`

// PrepareWorkerSession readies a new connection of the worker's pool (see
// riverCompletionCost). It is the pool's AfterConnect.
func PrepareWorkerSession(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, workerSessionSQL); err != nil {
		return fmt.Errorf("preparing a worker session: %w", err)
	}
	return nil
}
