package devlocal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/pgcluster"
)

// StartCluster starts devtool's own Postgres in dir on port, initializing
// it on the first run. The port is fixed, so that DATABASE_URL and `make
// claims` stay the same from run to run: a busy port is refused rather than
// swapped for another, since what holds it is most often a Postgres an
// earlier run left behind.
func StartCluster(ctx context.Context, con *Console, dir string, port int) (*pgcluster.Cluster, error) {
	// As root the server runs as the postgres user, which must be able to
	// reach dir.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", parent, err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		return nil, fmt.Errorf("making %s readable: %w", parent, err)
	}
	if err := StopLeftoverServer(dir, con); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := CheckFree(addr); err != nil {
		return nil, fmt.Errorf("the local Postgres's port %s is in use (%w): another `make run` may still be running, or a Postgres it started outlived it (find it with `ss -ltnp sport = :%d` and stop it); or set DATABASE_URL to use a server of your own",
			addr, err, port)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		con.Printf("devtool", "initializing a Postgres cluster in %s (first run only)", dir)
	}
	con.Printf("devtool", "starting Postgres from %s", dir)
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

// StopLeftoverServer stops a server still running in dir, left there by a
// devtool that was killed before it could stop it, so that it can be
// started again. Postgres removes its postmaster.pid on a clean shutdown, so
// the file's presence is the sign; a stale one (after a crash) is left for
// Postgres to deal with.
func StopLeftoverServer(dir string, con *Console) error {
	pidFile := filepath.Join(dir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || !servesDir(pid, dir) {
		return nil
	}
	con.Printf("devtool", "stopping the Postgres an earlier run left running in %s (pid %d)", dir, pid)
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

// ServerRunning reports whether a Postgres runs in dir now: a live process
// working in the directory its postmaster.pid names.
func ServerRunning(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return false
	}
	var pid int
	if _, err := fmt.Sscanf(string(b), "%d", &pid); err != nil || pid <= 0 {
		return false
	}
	return servesDir(pid, dir)
}

// RecreateDatabase drops and creates database name on the server adminURL
// names, and returns its URL.
func RecreateDatabase(ctx context.Context, adminURL, name string) (string, error) {
	if err := DropDatabase(ctx, adminURL, name); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL is not a URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase drops database name on the server adminURL names, forcing
// off any session still connected, so that a check starts and ends clean.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}
