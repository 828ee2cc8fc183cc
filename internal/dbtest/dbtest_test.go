package dbtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestTxIsRolledBack: what a test writes in its Tx is gone once the test
// has ended, and is never seen by another test's transaction meanwhile.
func TestTxIsRolledBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := "isolated_" + t.Name()
	count := func(q interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}) int {
		var n int
		require.NoError(t, q.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE event_id = $1`, id).Scan(&n))
		return n
	}
	t.Run("Writes", func(t *testing.T) {
		tx := dbtest.Tx(t)
		testfactory.Claim(ctx, t, tx, &testfactory.ClaimOpts{EventID: id})
		require.Equal(t, 1, count(tx))
		require.Zero(t, count(dbtest.Tx(t)), "a second test's transaction must not see the first's rows")
	})
	// The subtest's cleanups have run: its transaction has ended.
	require.Zero(t, count(dbtest.Tx(t)), "the ended test's rows must be rolled back, not committed")
}

func TestNewDBIsMigratedAndOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := dbtest.NewDB(t), dbtest.NewDB(t)
	require.NotEqual(t, a.Name, b.Name)
	testfactory.Claim(ctx, t, a.Pool, nil)
	var n int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&n), "River's tables are migrated too")
}
