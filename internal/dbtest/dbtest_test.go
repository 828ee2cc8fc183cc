package dbtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestTxIsRolledBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	testfactory.Claim(ctx, t, tx, &testfactory.ClaimOpts{EventID: "isolated"})

	other := dbtest.Tx(t)
	var n int
	require.NoError(t, other.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE event_id = 'isolated'`).Scan(&n))
	require.Zero(t, n, "a second test's transaction must not see the first's rows")
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
