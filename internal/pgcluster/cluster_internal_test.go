package pgcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestStartPicksAnotherPortWhenItsPickIsTaken: the port Start picked is
// taken before the server binds it (here by a listener held open), so it
// picks another and the cluster starts. Not parallel: it replaces pickPort
// while no other test of the package runs.
func TestStartPicksAnotherPortWhenItsPickIsTaken(t *testing.T) {
	ctx := context.Background()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	picks := 0
	pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })

	parent, err := os.MkdirTemp("", "hookgate-testpg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755)) // the server may run as postgres
	c, err := Start(ctx, filepath.Join(parent, "data"), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	require.Equal(t, 2, picks)
	require.NotEqual(t, taken, c.Port)
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	require.NoError(t, conn.Ping(ctx))
	require.NoError(t, conn.Close(ctx))
}
