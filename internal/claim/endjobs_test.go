package claim_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// endJobsBundle claims evt_e1 (routes ship and mail), evt_e2 and evt_e3
// (ship) in a database of the test's own, with every job running its first
// attempt, and returns the attempts and job runs that end them all.
func endJobsBundle(t *testing.T) (*bundle, []claim.Attempt, []claim.JobRun) {
	t.Helper()
	ctx := t.Context()
	b := setupDB(t)
	b.claimed(t, "evt_e1", "ship", "mail")
	b.claimed(t, "evt_e2", "ship")
	b.claimed(t, "evt_e3", "ship")
	running := &testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()}
	keys := []claim.Key{key("evt_e1", "ship"), key("evt_e2", "ship"), key("evt_e1", "mail"), key("evt_e3", "ship")}
	attempts, jobs := make([]claim.Attempt, len(keys)), make([]claim.JobRun, len(keys))
	for i, k := range keys {
		id := testfactory.SetJobs(ctx, t, b.conn, testfactory.JobWhere{Delivery: k}, running)
		require.Len(t, id, 1)
		attempts[i], jobs[i] = claim.Attempt{Key: k, Result: withCall(success, 1, 200, "ok")}, claim.JobRun{ID: id[0], Attempt: 1}
	}
	return b, attempts, jobs
}

// jobState returns the state of job id, "" when its row is gone.
func (b *bundle) jobState(t *testing.T, id int64) rivertype.JobState {
	t.Helper()
	var state rivertype.JobState
	err := b.conn.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return state
}

// TestEndJobs ends four jobs in one call, outside any transaction of the
// caller's: the ones still running their attempt end with their
// deliveries and claims (siblings rolled up together), and their job rows
// are deleted in the same transaction; a job River rescued meanwhile, and
// its delivery, are left alone; a delivery settled elsewhere keeps its
// status while its job's row is deleted.
func TestEndJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, attempts, jobs := endJobsBundle(t)
	const rescued, settled = 1, 3
	testfactory.SetJobs(ctx, t, b.conn, testfactory.JobWhere{ID: jobs[rescued].ID}, &testfactory.JobOpts{Attempt: 2})
	testfactory.SetDelivery(ctx, t, b.conn, attempts[settled].Key, &testfactory.DeliveryOpts{Status: claim.DeliveryFailed})

	live, recorded, err := b.store.EndJobs(ctx, attempts, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, true}, live)
	require.Equal(t, []bool{true, false, true, false}, recorded)

	require.Empty(t, b.jobState(t, jobs[0].ID), "an ended job's row is deleted")
	require.Empty(t, b.jobState(t, jobs[2].ID), "an ended job's row is deleted")
	require.Equal(t, rivertype.JobStateRunning, b.jobState(t, jobs[rescued].ID), "the rescued run owns its job")
	require.Empty(t, b.jobState(t, jobs[settled].ID), "an ended job's row is deleted")
	// evt_e3's claim is left as the settling found it: nothing was recorded.
	for id, want := range map[string]claim.Status{"evt_e1": claim.Completed, "evt_e2": claim.Processing, "evt_e3": claim.Processing} {
		c, _ := b.get(t, id)
		require.Equal(t, want, c.Status, id)
	}
	_, ds := b.get(t, "evt_e2")
	require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status, "the rescued run owns its delivery")
	require.Zero(t, ds["ship"].AttemptCount)
	// A history row for each attempt recorded, and none for the others.
	for id, want := range map[string]int{"evt_e1": 2, "evt_e2": 0, "evt_e3": 0} {
		rows, _ := b.attemptRows(t, id)
		require.Equal(t, want, rows, id)
	}
}

// TestEndJobsIsAllOrNothing: the statements of one end are one
// transaction. When the last of them (deleting the jobs) fails, the
// deliveries recorded before it are not: every delivery is still
// processing, every job still running, and ending them again succeeds.
func TestEndJobsIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, attempts, jobs := endJobsBundle(t)
	b.exec(t, `CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'completion refused';
END
$$`)
	b.exec(t, `CREATE TRIGGER refuse_completion BEFORE DELETE ON river_job
FOR EACH ROW WHEN (OLD.id = `+strconv.FormatInt(jobs[2].ID, 10)+`) EXECUTE FUNCTION refuse_completion()`)

	_, _, err := b.store.EndJobs(ctx, attempts, jobs)
	require.ErrorContains(t, err, "completion refused")
	for _, j := range jobs {
		require.Equal(t, rivertype.JobStateRunning, b.jobState(t, j.ID))
	}
	for _, id := range []string{"evt_e1", "evt_e2", "evt_e3"} {
		c, ds := b.get(t, id)
		require.Equal(t, claim.Processing, c.Status, id)
		require.Zero(t, c.AttemptCount, id)
		rows, _ := b.attemptRows(t, id)
		require.Zero(t, rows, id)
		for route, d := range ds {
			require.Equal(t, claim.DeliveryProcessing, d.Status, id+" "+route)
		}
	}

	b.exec(t, `DROP TRIGGER refuse_completion ON river_job`)
	live, recorded, err := b.store.EndJobs(ctx, attempts, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true}, live)
	require.Equal(t, []bool{true, true, true, true}, recorded)
}
