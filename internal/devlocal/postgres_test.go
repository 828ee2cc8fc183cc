package devlocal

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/proctest"
)

func TestServesDir(t *testing.T) {
	t.Parallel()

	wd, err := os.Getwd()
	require.NoError(t, err)
	require.True(t, servesDir(os.Getpid(), wd))
	require.True(t, servesDir(os.Getpid(), "."))
	require.False(t, servesDir(os.Getpid(), t.TempDir()))
	require.False(t, servesDir(1<<22+1, wd), "no such pid") // above the kernel's pid_max
}

func TestStopLeftoverServerIgnoresStalePIDFile(t *testing.T) {
	t.Parallel()

	// A pid file left by a crash, naming a live process that is not the
	// server (this test): nothing is signalled, and the file is left for
	// Postgres to replace.
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"+dir+"\n"), 0o600))
	out := &proctest.Buffer{}
	require.NoError(t, StopLeftoverServer(dir, NewConsole(out)))
	require.Empty(t, out.String())
	require.FileExists(t, pidFile)

	// No pid file: no server.
	require.NoError(t, StopLeftoverServer(t.TempDir(), NewConsole(out)))
}

func TestStartClusterRefusesABusyPort(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "pg")
	out := &proctest.Buffer{}
	_, err = StartCluster(t.Context(), NewConsole(out), dir, ln.Addr().(*net.TCPAddr).Port)
	require.ErrorContains(t, err, "the local Postgres's port "+ln.Addr().String()+" is in use")
	require.ErrorContains(t, err, "DATABASE_URL")
	require.NoDirExists(t, dir, "no cluster is initialized beside a server that may still use the directory")
}

func TestWithPermissionHint(t *testing.T) {
	t.Parallel()

	denied := errors.New(`starting postgres in /x/.local/pg: exit status 1: could not change directory to "/x/.local/pg": Permission denied`)
	other := errors.New("starting postgres in /x/.local/pg: exit status 1: FATAL: database files are incompatible with server")
	for _, tt := range []struct {
		name     string
		err      error
		root     bool
		wantHint bool
	}{
		{"PermissionAsRoot", denied, true, true},
		{"WrappedErrPermissionAsRoot", fmt.Errorf("creating: %w", fs.ErrPermission), true, true},
		{"OtherErrorAsRoot", other, true, false},
		{"PermissionNotRoot", denied, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := withPermissionHint(tt.err, "/x/.local/pg", tt.root)
			require.ErrorIs(t, err, tt.err)
			if tt.wantHint {
				require.ErrorContains(t, err, "every parent directory must be o+x")
			} else {
				require.Equal(t, tt.err, err)
			}
		})
	}
}

// The lab uses a Postgres that runs in the data directory already (a `make
// run` beside it) instead of starting one: a live process working in the
// directory named by its postmaster.pid.
func TestServerRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.False(t, ServerRunning(dir), "no pid file")
	server := exec.Command("sleep", "60")
	server.Dir = dir
	require.NoError(t, server.Start())
	pidFile := filepath.Join(dir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n%s\n", server.Process.Pid, dir), 0o600))
	require.True(t, ServerRunning(dir))
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "postmaster.pid"), fmt.Appendf(nil, "%d\n", server.Process.Pid), 0o600))
	require.False(t, ServerRunning(other), "a live process working elsewhere")
	require.NoError(t, server.Process.Kill())
	_ = server.Wait()
	require.False(t, ServerRunning(dir), "a stale pid file")
}
