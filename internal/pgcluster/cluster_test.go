package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestSynchronousStandby checks the pair failover tests stand on: the
// standby streams from the primary, a commit waits until the standby has
// it, and after the primary's postmaster is killed the promoted standby
// holds every committed row and accepts writes.
func TestSynchronousStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, standby := dbtest.NewReplicated(t, dbtest.Synchronous)

	p, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	defer p.Close(ctx)
	var syncState string
	require.NoError(t, p.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication`).Scan(&syncState))
	require.Equal(t, "sync", syncState, "commits wait for the standby")

	_, err = p.Exec(ctx, `CREATE TABLE acked (n int PRIMARY KEY)`)
	require.NoError(t, err)
	for n := range 50 {
		_, err := p.Exec(ctx, `INSERT INTO acked VALUES ($1)`, n)
		require.NoError(t, err)
	}

	s, err := pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	defer s.Close(ctx)
	var readOnly string
	require.NoError(t, s.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&readOnly))
	require.Equal(t, "on", readOnly, "a standby refuses writes")

	require.NoError(t, primary.KillPostmaster())
	require.Error(t, p.Ping(ctx), "the primary is gone")
	require.NoError(t, standby.Promote(ctx))
	var n int
	require.NoError(t, s.QueryRow(ctx, `SELECT count(*) FROM acked`).Scan(&n))
	require.Equal(t, 50, n, "every committed row is on the promoted standby")
	_, err = s.Exec(ctx, `INSERT INTO acked VALUES (50)`)
	require.NoError(t, err, "the promoted standby accepts writes, waiting for no standby")
}

// TestKilledPostmasterRestarts kills a server's postmaster alone and starts
// it again on the same data directory, as a crash and a supervisor's
// restart would: crash recovery keeps what was committed (with
// synchronous_commit on, which the test clusters' defaults turn off).
func TestKilledPostmasterRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent, err := os.MkdirTemp("", "hookgate-testpg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755)) // the server may run as postgres
	c, err := pgcluster.Start(ctx, filepath.Join(parent, "data"), 0, "synchronous_commit=on")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`)
	require.NoError(t, err)
	require.NoError(t, c.KillPostmaster())
	require.Error(t, conn.Ping(ctx))
	conn.Close(ctx)
	if err := c.Restart(ctx); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		t.Fatalf("%v\n%s", err, log)
	}
	conn, err = pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n))
	require.Equal(t, 1, n)
}
