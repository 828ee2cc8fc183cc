package claim_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// job changes the River job of a stripe delivery as opts says; nil deletes
// it.
func (b *bundle) job(t *testing.T, id, route string, opts *testfactory.JobOpts) {
	t.Helper()
	where := testfactory.JobWhere{Delivery: key(id, route)}
	if opts == nil {
		testfactory.DeleteJobs(t.Context(), t, b.conn, where)
		return
	}
	testfactory.SetJobs(t.Context(), t, b.conn, where, opts)
}

// stale makes a stripe delivery look untouched for an hour.
func (b *bundle) stale(t *testing.T, id, route string) {
	t.Helper()
	testfactory.SetDelivery(t.Context(), t, b.conn, key(id, route), &testfactory.DeliveryOpts{UpdatedAt: testfactory.Ago(time.Hour)})
}

// What may have become of a delivery's job outside the delivery's own
// transaction.
var (
	deleteJob   *testfactory.JobOpts // nil: the job is gone
	discardJob  = &testfactory.JobOpts{State: rivertype.JobStateDiscarded, FinalizedAt: testfactory.Now(), Attempt: 10}
	cancelJob   = &testfactory.JobOpts{State: rivertype.JobStateCancelled, FinalizedAt: testfactory.Now()}
	completeJob = &testfactory.JobOpts{State: rivertype.JobStateCompleted, FinalizedAt: testfactory.Now(), Attempt: 1}
)

const reconcileAge = 10 * time.Minute

func TestReconcile(t *testing.T) {
	t.Parallel()
	b := setupDB(t)

	t.Run("ConvergesOrphanedDeliveries", func(t *testing.T) {
		// Its job was deleted: requeued.
		b.claimed(t, "evt_lost", "ship")
		b.job(t, "evt_lost", "ship", deleteJob)
		b.stale(t, "evt_lost", "ship")
		// Its job completed outside the delivery's transaction: requeued.
		b.claimed(t, "evt_completed_job", "ship")
		b.job(t, "evt_completed_job", "ship", completeJob)
		b.stale(t, "evt_completed_job", "ship")
		// Its job was discarded on the last attempt: failed.
		b.claimed(t, "evt_discarded", "ship")
		b.job(t, "evt_discarded", "ship", discardJob)
		b.stale(t, "evt_discarded", "ship")
		// Its job was cancelled: failed.
		b.claimed(t, "evt_cancelled", "mail")
		b.job(t, "evt_cancelled", "mail", cancelJob)
		b.stale(t, "evt_cancelled", "mail")
		// One delivery's job discarded, its sibling's alive: the claim
		// keeps processing.
		b.claimed(t, "evt_partial", "ship", "mail")
		b.job(t, "evt_partial", "ship", discardJob)
		b.stale(t, "evt_partial", "ship")
		b.stale(t, "evt_partial", "mail")
		// Its job is alive: untouched, however old.
		b.claimed(t, "evt_live", "ship")
		b.stale(t, "evt_live", "ship")
		// Touched recently: untouched, even without a job.
		b.claimed(t, "evt_recent", "ship")
		b.job(t, "evt_recent", "ship", deleteJob)
		// Completed, its job long cleaned up: untouched.
		b.claimed(t, "evt_done", "ship")
		b.record(t, key("evt_done", "ship"), success)
		b.job(t, "evt_done", "ship", deleteJob)
		b.stale(t, "evt_done", "ship")

		_, staleDs := b.get(t, "evt_live")
		before := time.Now()

		res, err := b.store.Reconcile(t.Context(), reconcileAge, 100)
		require.NoError(t, err)
		require.Equal(t, claim.ReconcileResult{Requeued: 2, Failed: 3}, res)

		// The numbers the finalized jobs used are spent: a later job's
		// Hookgate-Attempt continues after them (a discarded job's last
		// attempt was never recorded).
		for id, want := range map[string]int{"evt_lost": 0, "evt_completed_job": 1, "evt_discarded": 10} {
			var base int
			require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT attempt_base FROM webhook_deliveries
WHERE provider = 'stripe' AND event_id = $1 AND route = 'ship'`, id).Scan(&base))
			require.Equal(t, want, base, id)
		}

		for _, id := range []string{"evt_lost", "evt_completed_job"} {
			c, ds := b.get(t, id)
			require.Equal(t, claim.Processing, c.Status, id)
			require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status, id)
			require.Zero(t, ds["ship"].AttemptCount, id)
			require.WithinDuration(t, before, ds["ship"].UpdatedAt, time.Minute, "%s: requeueing touches the delivery", id)
		}

		for id, route := range map[string]string{"evt_discarded": "ship", "evt_cancelled": "mail"} {
			c, ds := b.get(t, id)
			require.Equal(t, claim.DeliveryFailed, ds[route].Status, id)
			require.Zero(t, ds[route].AttemptCount, "%s: the reconciler makes no attempt", id)
			require.Equal(t, claim.Failed, c.Status, id)
			require.Equal(t, ds[route].LastError, c.LastError, id)
		}
		_, ds := b.get(t, "evt_discarded")
		require.Contains(t, ds["ship"].LastError, "discarded")
		_, ds = b.get(t, "evt_cancelled")
		require.Contains(t, ds["mail"].LastError, "cancelled")

		c, ds := b.get(t, "evt_partial")
		require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
		require.Contains(t, ds["ship"].LastError, "discarded")
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		require.Equal(t, claim.Processing, c.Status, "mail's job will still run")

		c, ds = b.get(t, "evt_live")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, staleDs, ds, "a delivery with a live job is left alone")

		c, ds = b.get(t, "evt_recent")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)

		c, _ = b.get(t, "evt_done")
		require.Equal(t, claim.Completed, c.Status)

		// Deleted jobs are gone, finalized ones stay, and each requeued
		// delivery has one new job.
		rows := b.requireJobs(t, slices.Concat(
			args("evt_completed_job", "ship"), args("evt_discarded", "ship"), args("evt_cancelled", "mail"),
			args("evt_partial", "ship", "mail"), args("evt_live", "ship"),
			args("evt_lost", "ship"), args("evt_completed_job", "ship"))...)
		states := map[rivertype.JobState]int{}
		for _, row := range rows {
			states[row.State]++
		}
		require.Equal(t, map[rivertype.JobState]int{
			rivertype.JobStateAvailable: 4, // evt_partial/mail, evt_live and the two new ones
			rivertype.JobStateCompleted: 1,
			rivertype.JobStateDiscarded: 2,
			rivertype.JobStateCancelled: 1,
		}, states)
	})

	t.Run("SecondPassDoesNothing", func(t *testing.T) {
		res, err := b.store.Reconcile(t.Context(), reconcileAge, 100)
		require.NoError(t, err)
		require.Equal(t, claim.ReconcileResult{}, res)
		b.requireJobs(t)

		// Even when the requeued deliveries look stale again: their new
		// jobs are alive.
		b.stale(t, "evt_lost", "ship")
		b.stale(t, "evt_completed_job", "ship")
		res, err = b.store.Reconcile(t.Context(), reconcileAge, 100)
		require.NoError(t, err)
		require.Equal(t, claim.ReconcileResult{}, res)
		b.requireJobs(t)
	})

	t.Run("LimitCapsAPass", func(t *testing.T) {
		for _, id := range []string{"evt_lost_1", "evt_lost_2"} {
			b.claimed(t, id, "ledger")
			b.job(t, id, "ledger", deleteJob)
			b.stale(t, id, "ledger")
		}

		for _, want := range []claim.ReconcileResult{{Requeued: 1}, {Requeued: 1}, {}} {
			res, err := b.store.Reconcile(t.Context(), reconcileAge, 1)
			require.NoError(t, err)
			require.Equal(t, want, res)
		}
		b.requireJobs(t, slices.Concat(args("evt_lost_1", "ledger"), args("evt_lost_2", "ledger"))...)
	})

	// A reopened delivery's earlier job, discarded before the reopen, does
	// not decide the fate of the run after it.
	t.Run("JobFinalizedBeforeReopenIsNoReason", func(t *testing.T) {
		b.claimed(t, "evt_rerun", "ship")
		b.job(t, "evt_rerun", "ship", &testfactory.JobOpts{State: rivertype.JobStateDiscarded, FinalizedAt: testfactory.Ago(2 * time.Hour), Attempt: 10})
		testfactory.SetDelivery(t.Context(), t, b.conn, key("evt_rerun", ""), &testfactory.DeliveryOpts{UpdatedAt: testfactory.Ago(3 * time.Hour)})
		res, err := b.store.Reconcile(t.Context(), reconcileAge, 100)
		require.NoError(t, err)
		require.Equal(t, claim.ReconcileResult{Failed: 1}, res)

		n, err := b.store.Reopen(t.Context(), "stripe", "evt_rerun", false)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		testfactory.DeleteJobs(t.Context(), t, b.conn, testfactory.JobWhere{Delivery: key("evt_rerun", ""), State: rivertype.JobStateAvailable})
		b.stale(t, "evt_rerun", "ship")

		res, err = b.store.Reconcile(t.Context(), reconcileAge, 100)
		require.NoError(t, err)
		require.Equal(t, claim.ReconcileResult{Requeued: 1}, res)
		c, ds := b.get(t, "evt_rerun")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
		b.requireJobs(t, args("evt_rerun", "ship", "ship")...) // the discarded one and the requeued one
	})

	// Every worker replica runs the reconciler: passes that overlap still
	// requeue each orphan once, because each re-checks it under the claim's
	// lock.
	t.Run("ConcurrentPassesRequeueOnce", func(t *testing.T) {
		ids := []string{"evt_orphan_1", "evt_orphan_2", "evt_orphan_3"}
		for _, id := range ids {
			b.claimed(t, id, "mail")
			b.job(t, id, "mail", deleteJob)
			b.stale(t, id, "mail")
		}

		const passes = 4
		results := make([]claim.ReconcileResult, passes)
		errs := make([]error, passes)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range passes {
			wg.Go(func() {
				<-start
				results[i], errs[i] = b.store.Reconcile(context.Background(), reconcileAge, 100)
			})
		}
		close(start)
		wg.Wait()

		var total claim.ReconcileResult
		for i := range passes {
			require.NoError(t, errs[i])
			total.Requeued += results[i].Requeued
			total.Failed += results[i].Failed
		}
		require.Equal(t, claim.ReconcileResult{Requeued: len(ids)}, total)
		b.requireJobs(t, slices.Concat(args(ids[0], "mail"), args(ids[1], "mail"), args(ids[2], "mail"))...)
	})
}
