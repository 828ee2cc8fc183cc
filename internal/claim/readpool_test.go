package claim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// openReadPool opens a read pool with l on a database of the test's own,
// which it returns too.
func openReadPool(t *testing.T, l claim.ReadLimits) (*claim.ReadPool, *dbtest.DB) {
	t.Helper()
	db := dbtest.NewDB(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = "hookgate-reads-test"
	p, err := claim.OpenReadPool(cfg, l)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	warm(t, p)
	return p, db
}

// warm has p open its first connection. Connecting counts against the wait
// timeout, and on a loaded machine may take longer; the connection the
// pool goes on making is then there for the next try.
func warm(t *testing.T, p *claim.ReadPool) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, p.QueryRow(t.Context(), `SELECT 1`).Scan(new(int)))
	}, 30*time.Second, 10*time.Millisecond)
}

func backend(t *testing.T, p *claim.ReadPool) int {
	t.Helper()
	var pid int
	require.NoError(t, p.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid))
	return pid
}

// A read past the pool's statement timeout fails with a ReadTimeoutError
// naming the timeout, from Query, QueryRow, Exec and a store's reads alike,
// and the connection stays in the pool for the next read.
func TestReadPoolStatementTimeout(t *testing.T) {
	t.Parallel()
	p, _ := openReadPool(t, claim.ReadLimits{MaxConns: 1, StatementTimeout: 200 * time.Millisecond, WaitTimeout: time.Second})
	ctx := t.Context()
	var setting string
	require.NoError(t, p.QueryRow(ctx, `SHOW statement_timeout`).Scan(&setting))
	require.Equal(t, "200ms", setting)
	pid := backend(t, p)

	requireStatementTimeout := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, claim.ErrReadTimeout)
		var rt *claim.ReadTimeoutError
		require.ErrorAs(t, err, &rt)
		require.Equal(t, claim.ReadTimeoutError{Limit: 200 * time.Millisecond}, *rt)
		require.Contains(t, err.Error(), "past its timeout of 200ms")
	}
	rows, err := p.Query(ctx, `SELECT pg_sleep(5)`)
	require.NoError(t, err)
	_, err = pgx.CollectRows(rows, pgx.RowTo[string])
	requireStatementTimeout(err)
	requireStatementTimeout(p.QueryRow(ctx, `SELECT pg_sleep(5)`).Scan(new(string)))
	_, err = p.Exec(ctx, `SELECT pg_sleep(5)`)
	requireStatementTimeout(err)
	// A store's read wraps it with what it was doing.
	_, err = claim.NewStore(p, nil, nil).Stats(ctx, time.Hour)
	require.NoError(t, err, "a quick read is not affected")

	require.Equal(t, pid, backend(t, p), "the connection outlives its timed-out statements")
}

// A read that finds every connection busy waits at most the wait timeout,
// then fails with a ReadTimeoutError that says so; once a connection comes
// free, reads go on.
func TestReadPoolWaitTimeout(t *testing.T) {
	t.Parallel()
	p, _ := openReadPool(t, claim.ReadLimits{MaxConns: 1, StatementTimeout: 5 * time.Second, WaitTimeout: time.Second})
	ctx := t.Context()
	tx, err := p.Begin(ctx) // holds the one connection
	require.NoError(t, err)

	_, err = claim.NewStore(p, nil, nil).StatusCounts(ctx, time.Now().Add(-time.Hour))
	require.ErrorIs(t, err, claim.ErrReadTimeout)
	var rt *claim.ReadTimeoutError
	require.ErrorAs(t, err, &rt)
	require.Equal(t, claim.ReadTimeoutError{Waiting: true, Limit: time.Second}, *rt)
	require.Contains(t, err.Error(), "no read connection came free within 1s")

	require.NoError(t, tx.Rollback(ctx))
	_, err = claim.NewStore(p, nil, nil).StatusCounts(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
}

// A read whose context ends (a viewer who went away) is cancelled on the
// server, not left running there while the pool opens another connection:
// the pool's bound on reads at once holds on the server too. Its error is
// the context's, not a timeout.
func TestReadPoolCancelEndsTheStatement(t *testing.T) {
	t.Parallel()
	p, db := openReadPool(t, claim.ReadLimits{MaxConns: 1, StatementTimeout: time.Minute, WaitTimeout: time.Second})
	pid := backend(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.QueryRow(ctx, `SELECT pg_sleep(60)`).Scan(new(string)) }()
	require.Eventually(t, func() bool {
		var n int
		err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the read runs")
	cancel()
	err := <-done
	require.Error(t, err)
	require.False(t, errors.Is(err, claim.ErrReadTimeout), "a read its caller ended did not time out: %v", err)
	var state string
	require.Eventually(t, func() bool {
		err := db.Pool.QueryRow(t.Context(), `SELECT state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state)
		return err == nil && state == "idle"
	}, 10*time.Second, 10*time.Millisecond, "the server ended the statement and kept the session: %s", state)
	require.Equal(t, pid, backend(t, p), "the pool kept the connection")
}
