package operator_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/operator"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestBulkRetryCellsDown: a bulk retry needs every cell. With one that
// cannot be reached, its dry run and the retry fail naming it, and the
// other cell's failed claims stay failed, with no audit row.
func TestBulkRetryCellsDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	eu := dbtest.NewDB(t)
	testfactory.Claim(ctx, t, eu.Pool, &testfactory.ClaimOpts{EventID: "evt_1", Status: claim.Failed,
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	down, err := pgxpool.New(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", port))
	require.NoError(t, err)
	t.Cleanup(down.Close)
	jobs, err := claim.NewInsertClient(eu.Pool, nil, 0)
	require.NoError(t, err)
	cells := []operator.Cell{
		{Name: "eu", Actions: &operator.Actions{Store: claim.NewStore(eu.Pool, jobs, func(string) int { return 3 })}},
		{Name: "us", Actions: &operator.Actions{Store: claim.NewStore(down, nil, nil)}},
	}
	for _, dryRun := range []bool{true, false} {
		_, err := operator.BulkRetryCells(operator.CLI(ctx), cells, claim.Search{}, false, dryRun, nil, nil)
		var un *operator.UnavailableError
		require.ErrorAs(t, err, &un, "dry run %v", dryRun)
		require.Equal(t, "us", un.Cell)
		require.EqualError(t, err, "cell us cannot be reached, and a bulk retry needs every cell: no claim was reopened")
	}
	var failed, audited int
	require.NoError(t, eu.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE status = 'failed'`).Scan(&failed))
	require.NoError(t, eu.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&audited))
	require.Equal(t, 1, failed)
	require.Zero(t, audited)

	// With eu alone, it is eu's BulkRetry.
	res, err := operator.BulkRetryCells(operator.CLI(ctx), cells[:1], claim.Search{}, false, false, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Reopened)
}
