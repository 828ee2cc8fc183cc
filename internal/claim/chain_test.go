package claim_test

import (
	"slices"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// chained returns stripe event id whose routes run after others: after
// maps a route to its predecessors.
func chained(id string, after map[string][]string) claim.Event {
	ev := event(id)
	ev.After = after
	return ev
}

// shipThenMail is the two-step chain: mail runs after ship.
var shipThenMail = map[string][]string{"mail": {"ship"}}

// released is a completion whose route has dependents, as the worker
// reports it.
var released = claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true, Release: true}

// end ends the running job of delivery k with r in one EndJobs call, as the
// worker does, and requires that it was recorded.
func (b *bundle) end(t *testing.T, k claim.Key, r claim.AttemptResult) {
	t.Helper()
	ids := testfactory.SetJobs(t.Context(), t, b.conn, testfactory.JobWhere{Delivery: k, State: rivertype.JobStateAvailable},
		&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()})
	require.Len(t, ids, 1, "one available job of %s", k)
	live, recorded, err := b.store.EndJobs(t.Context(), []claim.Attempt{{Key: k, Result: r}}, []claim.JobRun{{ID: ids[0], Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, live)
	require.Equal(t, []bool{true}, recorded)
	// The end deleted the job's row: requireJobs no longer expects it.
	ended := claim.DeliveryArgs(k)
	if i := slices.Index(b.jobs, ended); i >= 0 {
		b.jobs = slices.Delete(b.jobs, i, i+1)
	}
}

// statuses returns the statuses of a stripe claim and of its deliveries.
func (b *bundle) statuses(t *testing.T, id string) (claim.Status, map[string]claim.DeliveryStatus) {
	t.Helper()
	c, ds := b.get(t, id)
	out := map[string]claim.DeliveryStatus{}
	for r, d := range ds {
		out[r] = d.Status
	}
	return c.Status, out
}

// TestChainWaitsAtIngest: a route that runs after another gets a waiting
// delivery and no job, in the single claim and in a batch alike; the
// claim is processing.
func TestChainWaitsAtIngest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := testfactory.ClaimEvent(t.Context(), b.store, chained("evt_c1", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1}, res)
	b.claimMany(t, []*request{
		{ev: chained("evt_c2", shipThenMail), routes: []string{"ship", "mail"}},
		{ev: chained("evt_c3", map[string][]string{"ledger": {"ship", "mail"}}), routes: []string{"ship", "mail", "ledger"}},
	})
	for id, want := range map[string]map[string]claim.DeliveryStatus{
		"evt_c1": {"ship": claim.DeliveryProcessing, "mail": claim.DeliveryWaiting},
		"evt_c2": {"ship": claim.DeliveryProcessing, "mail": claim.DeliveryWaiting},
		"evt_c3": {"ship": claim.DeliveryProcessing, "mail": claim.DeliveryProcessing, "ledger": claim.DeliveryWaiting},
	} {
		st, ds := b.statuses(t, id)
		require.Equal(t, claim.Processing, st, id)
		require.Equal(t, want, ds, id)
	}
	b.requireJobs(t, append(append(args("evt_c1", "ship"), args("evt_c2", "ship")...), args("evt_c3", "ship", "mail")...)...)

	// Get and Export show what a delivery waits for.
	_, ds := b.get(t, "evt_c3")
	require.Equal(t, []string{"mail", "ship"}, ds["ledger"].After)
	require.Empty(t, ds["ship"].After)
	for _, e := range b.exported(t, claim.Search{}) {
		if e.EventID != "evt_c1" {
			continue
		}
		require.Equal(t, "mail", e.Deliveries[0].Route)
		require.Equal(t, claim.DeliveryWaiting, e.Deliveries[0].Status)
		require.Equal(t, []string{"ship"}, e.Deliveries[0].After)
	}
}

// TestChainReleasedByTheEndThatCompletesTheLastPredecessor: completing ship
// releases mail in the same EndJobs call (processing, with its job); fan-in
// waits for every predecessor; the claim completes with the last step.
func TestChainReleasedByTheEndThatCompletesTheLastPredecessor(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	_, err := testfactory.ClaimEvent(ctx, b.store, chained("evt_r1", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	_, err = testfactory.ClaimEvent(ctx, b.store, chained("evt_fan", map[string][]string{"ledger": {"ship", "mail"}}), []string{"ship", "mail", "ledger"}, true)
	require.NoError(t, err)
	b.requireJobs(t, append(args("evt_r1", "ship"), args("evt_fan", "ship", "mail")...)...)

	b.end(t, key("evt_r1", "ship"), withCall(released, 1, 201, "made"))
	rows, _ := b.attemptRows(t, "evt_r1")
	require.Equal(t, 1, rows, "an end that releases writes its attempt history too")
	st, ds := b.statuses(t, "evt_r1")
	require.Equal(t, claim.Processing, st)
	require.Equal(t, map[string]claim.DeliveryStatus{"ship": claim.DeliveryCompleted, "mail": claim.DeliveryProcessing}, ds)
	b.requireJobs(t, args("evt_r1", "mail")...)
	b.end(t, key("evt_r1", "mail"), success)
	st, _ = b.statuses(t, "evt_r1")
	require.Equal(t, claim.Completed, st)

	// Fan-in: ledger waits for ship and mail.
	b.end(t, key("evt_fan", "ship"), released)
	_, ds = b.statuses(t, "evt_fan")
	require.Equal(t, claim.DeliveryWaiting, ds["ledger"], "one predecessor of two completed")
	b.requireJobs(t)
	b.end(t, key("evt_fan", "mail"), released)
	_, ds = b.statuses(t, "evt_fan")
	require.Equal(t, claim.DeliveryProcessing, ds["ledger"])
	b.requireJobs(t, args("evt_fan", "ledger")...)
}

// TestChainFailedPredecessor: a failed predecessor leaves its dependent
// waiting, with no job, and the claim failed; a retry reopens only the
// predecessor, and its completion releases the dependent. A forced retry
// of the completed claim sends the dependent back to waiting.
func TestChainFailedPredecessor(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	_, err := testfactory.ClaimEvent(ctx, b.store, chained("evt_f1", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	b.requireJobs(t, args("evt_f1", "ship")...)

	b.end(t, key("evt_f1", "ship"), reject)
	st, ds := b.statuses(t, "evt_f1")
	require.Equal(t, claim.Failed, st)
	require.Equal(t, map[string]claim.DeliveryStatus{"ship": claim.DeliveryFailed, "mail": claim.DeliveryWaiting}, ds)
	b.requireJobs(t)

	n, err := b.store.Reopen(ctx, "stripe", "evt_f1", false)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, ds = b.statuses(t, "evt_f1")
	require.Equal(t, claim.DeliveryWaiting, ds["mail"])
	b.requireJobs(t, args("evt_f1", "ship")...)

	b.end(t, key("evt_f1", "ship"), released)
	b.requireJobs(t, args("evt_f1", "mail")...)
	b.end(t, key("evt_f1", "mail"), success)
	st, _ = b.statuses(t, "evt_f1")
	require.Equal(t, claim.Completed, st)

	n, err = b.store.Reopen(ctx, "stripe", "evt_f1", true)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	st, ds = b.statuses(t, "evt_f1")
	require.Equal(t, claim.Processing, st)
	require.Equal(t, map[string]claim.DeliveryStatus{"ship": claim.DeliveryProcessing, "mail": claim.DeliveryWaiting}, ds)
	b.requireJobs(t, args("evt_f1", "ship")...)
}

// TestChainSkippedPredecessor: a predecessor skipped by its business key
// skips its dependents, down the chain, naming the same holder; the claim
// is ignored, with no job.
func TestChainSkippedPredecessor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := testfactory.ClaimEvent(ctx, b.store, keyed("evt_holder", "ship", orderKey), []string{"ship"}, true)
	require.NoError(t, err)
	ev := keyed("evt_dup", "ship", orderKey)
	ev.After = map[string][]string{"mail": {"ship"}, "ledger": {"mail"}}
	res, err := testfactory.ClaimEvent(ctx, b.store, ev, []string{"ship", "mail", "ledger"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ledger", "mail", "ship"}}, res)
	_, ds := b.get(t, "evt_dup")
	for _, r := range []string{"ship", "mail", "ledger"} {
		require.Equal(t, claim.DeliverySkipped, ds[r].Status, r)
		require.Equal(t, "business key is held by stripe/evt_holder", ds[r].LastError, r)
	}
	b.requireJobs(t, args("evt_holder", "ship")...)
}

// TestChainReconcilerReleasesStranded: a waiting delivery whose
// predecessors all completed without releasing it (a completion that did
// not know of the chain) is released by the reconciler once stale.
func TestChainReconcilerReleasesStranded(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	_, err := testfactory.ClaimEvent(ctx, b.store, chained("evt_s1", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	_, err = testfactory.ClaimEvent(ctx, b.store, chained("evt_s2", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	b.requireJobs(t, append(args("evt_s1", "ship"), args("evt_s2", "ship")...)...)
	b.end(t, key("evt_s1", "ship"), success) // no Release: mail is stranded
	_, ds := b.statuses(t, "evt_s1")
	require.Equal(t, claim.DeliveryWaiting, ds["mail"])
	b.stale(t, "evt_s1", "mail")
	b.stale(t, "evt_s2", "mail") // its predecessor has not completed

	res, err := b.store.Reconcile(ctx, reconcileAge, 100)
	require.NoError(t, err)
	require.Equal(t, claim.ReconcileResult{Released: 1}, res)
	_, ds = b.statuses(t, "evt_s1")
	require.Equal(t, claim.DeliveryProcessing, ds["mail"])
	_, ds = b.statuses(t, "evt_s2")
	require.Equal(t, claim.DeliveryWaiting, ds["mail"])
	b.requireJobs(t, args("evt_s1", "mail")...)
}

// TestChainFanInWaitsBehindAFailedPredecessor: ledger runs after ship and
// mail; ship fails for good and mail completes. A failed predecessor is not
// a done one: neither the end that completes mail nor the reconciler, once
// ledger is stale, releases ledger. It stays waiting with no job and the
// claim is failed.
func TestChainFanInWaitsBehindAFailedPredecessor(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	_, err := testfactory.ClaimEvent(ctx, b.store, chained("evt_fan_fail", map[string][]string{"ledger": {"ship", "mail"}}), []string{"ship", "mail", "ledger"}, true)
	require.NoError(t, err)
	b.requireJobs(t, args("evt_fan_fail", "ship", "mail")...)

	b.end(t, key("evt_fan_fail", "ship"), reject)
	b.end(t, key("evt_fan_fail", "mail"), released)
	st, ds := b.statuses(t, "evt_fan_fail")
	require.Equal(t, claim.Failed, st)
	require.Equal(t, map[string]claim.DeliveryStatus{"ship": claim.DeliveryFailed, "mail": claim.DeliveryCompleted, "ledger": claim.DeliveryWaiting}, ds,
		"the end that completes mail does not release ledger behind the failed ship")
	b.requireJobs(t)

	b.stale(t, "evt_fan_fail", "ledger")
	res, err := b.store.Reconcile(ctx, reconcileAge, 100)
	require.NoError(t, err)
	require.Equal(t, claim.ReconcileResult{}, res, "the reconciler finds nothing to release")
	_, ds = b.statuses(t, "evt_fan_fail")
	require.Equal(t, claim.DeliveryWaiting, ds["ledger"])
	b.requireJobs(t)
}
