package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func exec(t *testing.T, c *pgcluster.Cluster, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// write inserts a row through pool and returns the port of the server that
// took it.
func write(ctx context.Context, pool *pgxpool.Pool) (port int, err error) {
	err = pool.QueryRow(ctx, `INSERT INTO w VALUES (default) RETURNING inet_server_port()`).Scan(&port)
	return port, err
}

// TestPoolFollowsTheWritableHost opens the binaries' pool on a two-host
// DATABASE_URL and moves the writable server from one host to the other
// under it: connections made before the move hear "read-only" at most once
// each and are dropped, new ones are made to the writable host, and the
// readiness check says not ready while neither host takes writes.
func TestPoolFollowsTheWritableHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := dbtest.NewCluster(t), dbtest.NewCluster(t)
	for _, c := range []*pgcluster.Cluster{a, b} {
		exec(t, c, `CREATE TABLE w (n serial PRIMARY KEY)`)
	}
	require.NoError(t, b.SetReadOnly(context.Background(), true))

	const conns = 4
	for _, url := range []string{
		// Several hosts alone imply read-write.
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&pool_max_conns=%d", b.Port, a.Port, conns),
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&pool_max_conns=%d&target_session_attrs=read-write", b.Port, a.Port, conns),
	} {
		require.NoError(t, a.SetReadOnly(context.Background(), false))
		require.NoError(t, b.SetReadOnly(context.Background(), true))
		pool, err := cli.OpenPool(ctx, cli.Env{Getenv: func(k string) string {
			return map[string]string{"DATABASE_URL": url}[k]
		}, Stdout: io.Discard, Stderr: io.Discard})
		require.NoError(t, err)
		ready := cli.Writable{Pool: pool}

		// Fill the pool: every connection is to a, the writable host, though
		// b is listed first.
		held := make([]*pgxpool.Conn, conns)
		for i := range held {
			held[i], err = pool.Acquire(ctx)
			require.NoError(t, err)
		}
		for _, c := range held {
			var port int
			require.NoError(t, c.QueryRow(ctx, `INSERT INTO w VALUES (default) RETURNING inet_server_port()`).Scan(&port))
			require.Equal(t, a.Port, port)
			c.Release()
		}
		require.NoError(t, ready.Ping(ctx))

		// No host takes writes: not ready, and writes fail.
		require.NoError(t, a.SetReadOnly(context.Background(), true))
		require.Eventually(t, func() bool { return ready.Ping(ctx) != nil }, 30*time.Second, 20*time.Millisecond)
		_, err = write(ctx, pool)
		require.Error(t, err)

		// b takes writes now. Each stale connection fails once at most and
		// goes; then every write lands on b.
		require.NoError(t, b.SetReadOnly(context.Background(), false))
		failed := 0
		require.Eventually(t, func() bool {
			port, err := write(ctx, pool)
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "25006" {
				failed++
			}
			return err == nil && port == b.Port
		}, 30*time.Second, 20*time.Millisecond)
		require.LessOrEqual(t, failed, conns, "a read-only connection is dropped, not used again")
		for range 2 * conns {
			port, err := write(ctx, pool)
			require.NoError(t, err)
			require.Equal(t, b.Port, port)
		}
		require.NoError(t, ready.Ping(ctx))
		pool.Close()
	}
}
