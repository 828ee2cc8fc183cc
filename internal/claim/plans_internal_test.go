package claim

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestHotPathsPlanOnce runs the statements that accept, load and end
// deliveries as ingest and the worker run them, each more often than the
// five runs after which Postgres first weighs a generic plan, and reads
// from the connection's prepared statements how each was planned: never
// with a custom plan, which Postgres makes at every run of a statement
// whose arrays hold one row (genericPlansSQL). The claim's transaction
// gives its other statements the session's plan_cache_mode back.
func TestHotPathsPlanOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := NewStore(tx, client, func(string) int { return 10 })

	type plans struct{ generic, custom int64 }
	statements := map[string]string{
		"claiming events":              claimManySQL,
		"loading deliveries":           loadDeliveriesSQL,
		"locking claims":               lockClaimsSQL,
		"locking running jobs":         lockRunningJobsSQL,
		"recording attempts":           recordAttemptsSQL,
		"ending jobs":                  deleteJobsSQL,
		"releasing waiting deliveries": releaseSQL,
	}
	read := func() map[string]plans {
		got := map[string]plans{}
		for name, sql := range statements {
			var p plans
			err := tx.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
				sql).Scan(&p.generic, &p.custom)
			if err != pgx.ErrNoRows {
				require.NoError(t, err)
			}
			got[name] = p
		}
		return got
	}
	var mode string
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
	before := read()

	// In production the load's and the ends' batches are transactions of
	// their own, and their setting ends with them; here they run inside
	// the test's transaction, so each call starts from the session's value.
	fresh := func() {
		_, err := tx.Exec(ctx, `RESET plan_cache_mode`)
		require.NoError(t, err)
	}

	const runs = 8
	keys := make([]Key, runs)
	for i := range runs {
		id := fmt.Sprintf("evt_plan_once_%d", i)
		keys[i] = Key{Provider: "stripe", EventID: id, Route: "ship"}
		fresh()
		_, err := store.ClaimMany(ctx, []Request{{Event: Event{Provider: "stripe", ID: id, Type: "invoice.paid",
			ContentType: "application/json", Payload: []byte(`{"id": "` + id + `"}`)}, Routes: []string{"ship"}}})
		require.NoError(t, err)
		var now string
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&now))
		require.Equal(t, mode, now, "the claim's transaction goes on with the session's plan_cache_mode")
	}
	for i := range runs {
		fresh()
		ds, err := store.LoadDeliveries(ctx, keys[i:i+1])
		require.NoError(t, err)
		require.NotNil(t, ds[0], "the delivery of %v loads", keys[i])
	}
	// Both of EndJobs' batches: ends alone, and ends that may release
	// dependents (releaseSQL).
	for _, release := range []bool{false, true} {
		for i := range runs {
			fresh()
			_, recorded, err := store.EndJobs(ctx,
				[]Attempt{{Key: keys[i], Result: AttemptResult{Status: DeliveryCompleted, Attempted: true, Release: release}}},
				[]JobRun{{ID: int64(-1 - i), Attempt: 1}})
			require.NoError(t, err)
			require.False(t, recorded[0], "an attempt whose job is not running is not recorded")
		}
	}

	after := read()
	for name := range statements {
		require.Equal(t, before[name].custom, after[name].custom, "%s made a custom plan", name)
		require.GreaterOrEqual(t, after[name].generic-before[name].generic, int64(runs), "%s ran on its generic plan", name)
	}
}
