package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestClaimSource: a claim records where it came from, a webhook unless
// its winning copy says otherwise, and a later copy from elsewhere is a
// duplicate that changes nothing.
func TestClaimSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	b.claimed(t, "evt_src_webhook", "ship")
	c, _ := b.get(t, "evt_src_webhook")
	require.Equal(t, claim.SourceWebhook, c.Source)

	ev := event("evt_src_reconcile")
	ev.Source = claim.SourceReconcile
	res, err := b.store.Claim(ctx, ev, []string{"ship"}, false)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)
	c, _ = b.get(t, "evt_src_reconcile")
	require.Equal(t, claim.SourceReconcile, c.Source)

	// The webhook copy that comes later is a duplicate; the source stays.
	res, err = b.store.Claim(ctx, event("evt_src_reconcile"), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Duplicate, res.Decision)
	c, _ = b.get(t, "evt_src_reconcile")
	require.Equal(t, claim.SourceReconcile, c.Source)

	listed, err := b.store.SearchClaims(ctx, claim.Search{Provider: "stripe", Limit: 500})
	require.NoError(t, err)
	sources := map[string]string{}
	for _, r := range listed {
		sources[r.EventID] = r.Source
	}
	require.Equal(t, claim.SourceReconcile, sources["evt_src_reconcile"])
	require.Equal(t, claim.SourceWebhook, sources["evt_src_webhook"])

	bad := event("evt_src_bad")
	bad.Source = "carrier-pigeon"
	_, err = b.store.Claim(ctx, bad, nil, false)
	require.ErrorIs(t, err, claim.ErrUnstorable)
}

// TestReconcileRuns records runs, lists them newest first, and reads the
// cursor only from finished, successful, real runs.
func TestReconcileRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	cursor, err := b.store.ReconcileCursor(ctx, "stripe-runs")
	require.NoError(t, err)
	require.Nil(t, cursor, "no run yet")

	since := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	newest := time.Now().Add(-time.Hour).Truncate(time.Second)
	run, err := b.store.StartReconcileRun(ctx, claim.ReconcileRun{Provider: "stripe-runs", Trigger: claim.TriggerSchedule, Since: since})
	require.NoError(t, err)
	require.NotZero(t, run.ID)
	run.Newest, run.Listed, run.Claimed, run.Skipped = &newest, 5, 2, 3
	require.NoError(t, b.store.FinishReconcileRun(ctx, run))

	later := newest.Add(time.Minute)
	for _, r := range []claim.ReconcileRun{
		{Provider: "stripe-runs", Trigger: claim.TriggerCLI, DryRun: true, Since: since, Newest: &later},
		{Provider: "stripe-runs", Trigger: claim.TriggerAPI, Actor: "ops", Since: since, Newest: &later, Error: "stripe answered 401"},
	} {
		started, err := b.store.StartReconcileRun(ctx, r)
		require.NoError(t, err)
		r.ID = started.ID
		require.NoError(t, b.store.FinishReconcileRun(ctx, r))
	}
	_, err = b.store.StartReconcileRun(ctx, claim.ReconcileRun{Provider: "stripe-runs", Trigger: claim.TriggerSchedule, Since: since})
	require.NoError(t, err)

	cursor, err = b.store.ReconcileCursor(ctx, "stripe-runs")
	require.NoError(t, err)
	require.NotNil(t, cursor)
	require.True(t, newest.Equal(*cursor), "dry and failed runs do not move it: %s", cursor)

	runs, err := b.store.ReconcileRuns(ctx, "stripe-runs", 0)
	require.NoError(t, err)
	require.Len(t, runs, 4)
	require.Nil(t, runs[0].FinishedAt, "the newest is still running")
	require.Equal(t, "stripe answered 401", runs[1].Error)
	require.Equal(t, "ops", runs[1].Actor)
	require.True(t, runs[2].DryRun)
	first := runs[3]
	require.Equal(t, []int{5, 2, 0, 3}, []int{first.Listed, first.Claimed, first.Redelivered, first.Skipped})
	require.True(t, since.Equal(first.Since))
	require.NotNil(t, first.FinishedAt)
}

// TestPruneReconcileRuns: retention deletes the runs as old as the claims
// it deletes, and counts them when dry.
func TestPruneReconcileRuns(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	for _, ago := range []time.Duration{100 * 24 * time.Hour, 95 * 24 * time.Hour, time.Hour} {
		run, err := b.store.StartReconcileRun(ctx, claim.ReconcileRun{Provider: "stripe", Trigger: claim.TriggerSchedule, Since: time.Now()})
		require.NoError(t, err)
		b.exec(t, `UPDATE reconcile_runs SET started_at = now() - make_interval(secs => $2) WHERE id = $1`, run.ID, ago.Seconds())
	}
	policy := claim.Retention{Claims: 90 * 24 * time.Hour, Payloads: 7 * 24 * time.Hour, BatchSize: 1}
	due, err := b.store.PruneDue(ctx, policy)
	require.NoError(t, err)
	require.Equal(t, 2, due.RunsDeleted)
	res, err := b.store.Prune(ctx, policy)
	require.NoError(t, err)
	require.Equal(t, claim.PruneResult{RunsDeleted: 2}, res)
	runs, err := b.store.ReconcileRuns(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, runs, 1)
}

// TestLockReconcile: while one run of a provider holds its lock, another
// (on another connection, as another worker's) is refused at once; another
// provider's is not; once the first ends, the lock is free again.
func TestLockReconcile(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.store.LockReconcile(ctx, "stripe", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ran := false
	err := b.store.LockReconcile(ctx, "stripe", func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, claim.ErrReconcileRunning)
	require.False(t, ran)
	require.NoError(t, b.store.LockReconcile(ctx, "github", func(context.Context) error { ran = true; return nil }))
	require.True(t, ran, "another provider's lock is its own")
	close(release)
	require.NoError(t, <-done)
	ran = false
	require.NoError(t, b.store.LockReconcile(ctx, "stripe", func(context.Context) error { ran = true; return nil }))
	require.True(t, ran)
}
