package operator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/operator"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestPruneAudit(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	ctx := t.Context()
	for range 5 {
		testfactory.Audit(ctx, t, tx, "alice", operator.ActionRetry, testfactory.Ago(400*24*time.Hour))
	}
	young := testfactory.Audit(ctx, t, tx, "bob", operator.ActionPause, testfactory.Ago(300*24*time.Hour))
	n, err := operator.PruneAudit(ctx, tx, 365*24*time.Hour, 2)
	require.NoError(t, err)
	require.Equal(t, 5, n, "in batches of 2")
	left, err := operator.ListAudit(ctx, tx, 10, nil)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, young, left[0].ID)
}

func TestListAuditPages(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	ctx := t.Context()
	var ids []int64
	for i := range 5 {
		ids = append([]int64{testfactory.Audit(ctx, t, tx, "alice", operator.ActionRetry, testfactory.Ago(time.Duration(10-i)*time.Minute))}, ids...)
	}
	var got []int64
	var pos *operator.AuditPosition
	for range 3 {
		page, err := operator.ListAudit(ctx, tx, 2, pos)
		require.NoError(t, err)
		for _, e := range page {
			got = append(got, e.ID)
		}
		if len(page) < 2 {
			break
		}
		pos = &operator.AuditPosition{At: page[len(page)-1].At, ID: page[len(page)-1].ID}
	}
	require.Equal(t, ids, got, "newest first, no repeats, no gaps")
}

// Each row says where its action came from; a listing filters by actor,
// action and target.
func TestAuditOriginAndFilters(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	ctx := t.Context()
	require.NoError(t, operator.Record(operator.WithOrigin(ctx, operator.OriginConsole), tx, nil, "alice", operator.ActionPause, "ship", nil))
	require.NoError(t, operator.Record(operator.WithOrigin(ctx, operator.OriginAPI), tx, nil, "alice", operator.ActionRetry, "stripe/evt_1", nil))
	require.NoError(t, operator.Record(ctx, tx, nil, "cli:root", operator.ActionPause, "mail", nil))
	require.NoError(t, operator.Record(ctx, tx, nil, "breaker", operator.ActionPause, "mail", nil))

	all, err := operator.ListAudit(ctx, tx, 10, nil)
	require.NoError(t, err)
	origins := map[string]string{}
	for _, e := range all {
		origins[e.Actor+" "+e.Target] = e.Origin
	}
	require.Equal(t, map[string]string{"alice ship": "console", "alice stripe/evt_1": "api", "cli:root mail": "cli", "breaker mail": ""}, origins)

	count := func(f operator.AuditFilter) int {
		t.Helper()
		es, err := operator.ListAuditWhere(ctx, tx, f, 10, nil)
		require.NoError(t, err)
		return len(es)
	}
	require.Equal(t, 2, count(operator.AuditFilter{Actor: "alice"}))
	require.Equal(t, 3, count(operator.AuditFilter{Action: operator.ActionPause}))
	require.Equal(t, 2, count(operator.AuditFilter{Action: operator.ActionPause, Target: "mail"}))
	require.Equal(t, 0, count(operator.AuditFilter{Actor: "bob"}))
}
