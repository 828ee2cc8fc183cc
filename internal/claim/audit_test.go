package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestPruneAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for range 5 {
		testfactory.Audit(ctx, t, b.conn, "alice", "retry", testfactory.Ago(400*24*time.Hour))
	}
	young := testfactory.Audit(ctx, t, b.conn, "bob", "pause", testfactory.Ago(300*24*time.Hour))
	n, err := b.store.PruneAudit(ctx, 365*24*time.Hour, 2)
	require.NoError(t, err)
	require.Equal(t, 5, n, "in batches of 2")
	left, err := b.store.AuditRows(ctx, claim.AuditFilter{}, 10, nil)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, young, left[0].ID)
}

func TestAuditRowsPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var ids []int64
	for i := range 5 {
		ids = append([]int64{testfactory.Audit(ctx, t, b.conn, "alice", "retry", testfactory.Ago(time.Duration(10-i)*time.Minute))}, ids...)
	}
	var got []int64
	var pos *claim.AuditPosition
	for range 3 {
		page, err := b.store.AuditRows(ctx, claim.AuditFilter{}, 2, pos)
		require.NoError(t, err)
		for _, e := range page {
			got = append(got, e.ID)
		}
		if len(page) < 2 {
			break
		}
		pos = &claim.AuditPosition{At: page[len(page)-1].At, ID: page[len(page)-1].ID}
	}
	require.Equal(t, ids, got, "newest first, no repeats, no gaps")
}

// Each row says who acted and where from, as the context says; a listing
// filters by actor, action and target.
func TestAuditActorOriginAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	alice := claim.WithActor(ctx, "alice")
	require.NoError(t, b.store.Audit(claim.WithOrigin(alice, claim.OriginConsole), claim.AuditEntry{Action: "pause", Target: "ship"}))
	require.NoError(t, b.store.Audit(claim.WithOrigin(alice, claim.OriginAPI), claim.AuditEntry{Action: "retry", Target: "stripe/evt_1",
		Detail: map[string]any{"force": true}}))
	require.NoError(t, b.store.Audit(claim.WithOrigin(claim.WithActor(ctx, "cli:root"), claim.OriginCLI), claim.AuditEntry{Action: "pause", Target: "mail"}))
	require.NoError(t, b.store.Audit(claim.WithActor(ctx, claim.ActorBreaker), claim.AuditEntry{Action: "pause", Target: "mail"}))

	all, err := b.store.AuditRows(ctx, claim.AuditFilter{}, 10, nil)
	require.NoError(t, err)
	origins := map[string]string{}
	for _, e := range all {
		origins[e.Actor+" "+e.Target] = e.Origin
		if e.Target == "stripe/evt_1" {
			require.JSONEq(t, `{"force":true}`, string(e.Detail))
		} else {
			require.JSONEq(t, `{}`, string(e.Detail), "no detail is {}")
		}
	}
	require.Equal(t, map[string]string{"alice ship": "console", "alice stripe/evt_1": "api", "cli:root mail": "cli", "breaker mail": ""}, origins)

	count := func(f claim.AuditFilter) int {
		t.Helper()
		es, err := b.store.AuditRows(ctx, f, 10, nil)
		require.NoError(t, err)
		return len(es)
	}
	require.Equal(t, 2, count(claim.AuditFilter{Actor: "alice"}))
	require.Equal(t, 3, count(claim.AuditFilter{Action: "pause"}))
	require.Equal(t, 2, count(claim.AuditFilter{Action: "pause", Target: "mail"}))
	require.Equal(t, 0, count(claim.AuditFilter{Actor: "bob"}))
}

// An audit row is never written without an actor: a context that carries
// none is a wiring mistake, refused, and nothing is written.
func TestAuditRefusesNoActor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := claim.WithOrigin(t.Context(), claim.OriginAPI)
	require.ErrorContains(t, b.store.Audit(ctx, claim.AuditEntry{Action: "pause", Target: "ship"}), "no actor")
	rows, err := b.store.AuditRows(ctx, claim.AuditFilter{}, 10, nil)
	require.NoError(t, err)
	require.Empty(t, rows)
}

// The breaker's own changes of state are audited as the breaker's, with
// no origin, whatever the context of the delivery that caused them; a
// circuit closed by hand is audited under the context's actor and origin.
func TestBreakerAuditActorAndOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := claim.WithOrigin(claim.WithActor(t.Context(), "alice"), claim.OriginConsole)
	set := claim.BreakerSettings{Failures: 1, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	ch, err := b.store.BreakerApply(alice, "audited", claim.BreakerFailed, set, nil)
	require.NoError(t, err)
	require.Equal(t, claim.ActionBreakerOpen, ch.Action)
	_, err = b.store.BreakerApply(t.Context(), "audited", claim.BreakerClosedByHand, set, nil)
	require.ErrorContains(t, err, "no actor", "a hand close needs its actor")
	ch, err = b.store.BreakerApply(alice, "audited", claim.BreakerClosedByHand, set, map[string]any{"was_open": true})
	require.NoError(t, err)
	require.Equal(t, claim.ActionBreakerClose, ch.Action)

	rows, err := b.store.AuditRows(t.Context(), claim.AuditFilter{Target: "audited"}, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, []string{claim.ActionBreakerClose, "alice", claim.OriginConsole}, []string{rows[0].Action, rows[0].Actor, rows[0].Origin})
	require.Equal(t, []string{claim.ActionBreakerOpen, claim.ActorBreaker, ""}, []string{rows[1].Action, rows[1].Actor, rows[1].Origin})
}
