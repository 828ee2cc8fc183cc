package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookgate/hookgate/internal/pgcluster"
)

// startCluster starts devtool's own Postgres in dir on port, initializing
// it on the first run. The port is fixed, so that DATABASE_URL and `make
// claims` stay the same from run to run: a busy port is refused rather than
// swapped for another, since what holds it is most often a Postgres an
// earlier run left behind.
func startCluster(ctx context.Context, con *console, dir string, port int) (*pgcluster.Cluster, error) {
	// As root the server runs as the postgres user, which must be able to
	// reach dir.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", parent, err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		return nil, fmt.Errorf("making %s readable: %w", parent, err)
	}
	if err := stopLeftoverServer(dir, con); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := checkFree(addr); err != nil {
		return nil, fmt.Errorf("the local Postgres's port %s is in use (%w): another `make run` may still be running, or a Postgres it started outlived it (find it with `ss -ltnp sport = :%d` and stop it); or set DATABASE_URL to use a server of your own",
			addr, err, port)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		con.printf("devtool", "initializing a Postgres cluster in %s (first run only)", dir)
	}
	con.printf("devtool", "starting Postgres from %s", dir)
	// Not ctx: a Ctrl-C during start-up would kill pg_ctl and could leave
	// the server running unowned. The caller stops it once it is up.
	c, err := pgcluster.Start(context.WithoutCancel(ctx), dir, port)
	if err != nil {
		return nil, withPermissionHint(err, dir, os.Geteuid() == 0)
	}
	return c, nil
}

// withPermissionHint adds to a failure to start Postgres as root what is
// most often behind a permission error then, and only to a permission error.
func withPermissionHint(err error, dir string, root bool) error {
	if !root || !(errors.Is(err, fs.ErrPermission) || strings.Contains(strings.ToLower(err.Error()), "permission denied")) {
		return err
	}
	return fmt.Errorf("%w (as root, the server runs as the postgres user, which needs to reach %s: every parent directory must be o+x)", err, dir)
}

// stopLocal is `devtool stop`: it stops the Postgres `devtool run` keeps in
// pgDir if one still runs there, so that `make clean` never deletes a data
// directory under a live server.
func stopLocal(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stop", "stop", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("stop takes no arguments, got %q", fs.Args())
	}
	return stopLeftoverServer(pgDir, &console{w: stdout})
}

// stopLeftoverServer stops a server still running in dir, left there by a
// devtool that was killed before it could stop it, so that it can be
// started again. Postgres removes its postmaster.pid on a clean shutdown, so
// the file's presence is the sign; a stale one (after a crash) is left for
// Postgres to deal with.
func stopLeftoverServer(dir string, con *console) error {
	pidFile := filepath.Join(dir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || !servesDir(pid, dir) {
		return nil
	}
	con.printf("devtool", "stopping the Postgres an earlier run left running in %s (pid %d)", dir, pid)
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil { // SIGINT: fast shutdown
		return fmt.Errorf("stopping the Postgres left running in %s (pid %d): %w", dir, pid, err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(pidFile); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	return fmt.Errorf("the Postgres left running in %s (pid %d) did not stop within a minute", dir, pid)
}

// servesDir reports whether pid is a live process working in dir, as a
// postmaster does in its data directory; that tells it from an unrelated
// process that took the pid of one that crashed. Without /proc (outside
// Linux) any live process is taken for the server.
func servesDir(pid int, dir string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if _, err := os.Stat("/proc/self/cwd"); err != nil {
		return true
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	// cwd is absolute, with symlinks resolved.
	want, rerr := filepath.EvalSymlinks(dir)
	if rerr == nil {
		want, rerr = filepath.Abs(want)
	}
	return err == nil && rerr == nil && cwd == want
}

// runPostgres is the Postgres `devtool run` uses: the server DATABASE_URL
// names, or devtool's own, started here. stop stops the latter, and is nil
// for the former, which is not devtool's to stop.
func runPostgres(ctx context.Context, con *console, getenv func(string) string) (dbURL string, stop func() error, err error) {
	dbURL = getenv("DATABASE_URL")
	if dbURL != "" {
		con.printf("devtool", "using DATABASE_URL from the environment; no local Postgres started")
		return dbURL, nil, nil
	}
	cluster, cerr := startCluster(ctx, con, pgDir, pgPort)
	if cerr != nil {
		return "", nil, cerr
	}
	stop = func() error {
		con.printf("devtool", "stopping Postgres")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if serr := cluster.Stop(sctx); serr != nil {
			return serr
		}
		con.printf("devtool", "Postgres stopped")
		return nil
	}
	dbURL = cluster.URL("postgres")
	con.printf("devtool", "Postgres is up (log: %s): DATABASE_URL=%s", filepath.Join(pgDir, "server.log"), dbURL)
	return dbURL, stop, nil
}
