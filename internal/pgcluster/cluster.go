// Package pgcluster starts and stops throwaway PostgreSQL clusters with the
// binaries installed on the machine. Local runs use one when DATABASE_URL is
// unset, tests use one when no server is reachable, and outage tests use one
// of their own so they can stop it without touching a shared server.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is one running (or stopped) throwaway cluster.
type Cluster struct {
	// Dir is the data directory; it also holds the socket and the server log.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int

	// Settings are extra server settings ("name=value", no spaces), applied
	// after the defaults at every start, so they override them: e.g.
	// "synchronous_commit=on" where a test needs durable commits.
	Settings []string
	// Env holds extra environment variables ("NAME=value") for the server's
	// processes, applied at every start: e.g. a library a benchmark
	// preloads to slow the server's disk flushes.
	Env []string

	bin   string // directory of initdb and pg_ctl
	runAs string // user to run the server as when we are root; "" otherwise
}

// URL returns a connection URL for database name as the postgres superuser.
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, name)
}

// Start initializes dir if it holds no cluster yet, then starts a server on
// port (0 picks a free one) with the extra settings given (see
// Cluster.Settings) and waits until it accepts connections. As root it runs
// initdb and the server as the postgres user, since both refuse root.
func Start(ctx context.Context, dir string, port int, settings ...string) (*Cluster, error) {
	c, err := newCluster(dir, port, settings)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err != nil {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	for try := 1; ; try++ {
		logged := c.logSize()
		err := c.Restart(ctx)
		if err == nil {
			return c, nil
		}
		// A port picked here can be taken before the server binds it (by
		// another test's listener, or as an outgoing connection's local
		// port): pick another, a few times.
		if port != 0 || try == startTries || !c.portTakenSince(logged) {
			return nil, err
		}
		if c.Port, err = pickPort(); err != nil {
			return nil, err
		}
	}
}

// startTries bounds the ports Start tries when it picks them itself.
const startTries = 5

// pickPort picks a free port for a cluster (a variable for tests).
var pickPort = freePort

// logSize is the size of the server's log so far (0 when there is none).
func (c *Cluster) logSize() int64 {
	fi, err := os.Stat(filepath.Join(c.Dir, "server.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// portTakenSince reports whether the server's log, past its first from
// bytes, says its port was in use.
func (c *Cluster) portTakenSince(from int64) bool {
	log, err := os.ReadFile(filepath.Join(c.Dir, "server.log"))
	if err != nil || int64(len(log)) < from {
		return false
	}
	return bytes.Contains(log[from:], []byte("Address already in use"))
}

func newCluster(dir string, port int, settings []string) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Settings: settings, bin: bin}
	if os.Geteuid() == 0 {
		c.runAs = "postgres"
		if _, err := user.Lookup(c.runAs); err != nil {
			return nil, errors.New("running as root and there is no postgres user to run the server as; run as an ordinary user or create one")
		}
	}
	if port == 0 {
		if port, err = pickPort(); err != nil {
			return nil, err
		}
	}
	c.Port = port
	return c, nil
}

// StartStandby makes a streaming standby of c in dir with pg_basebackup -R
// (which writes primary_conninfo and standby.signal), then starts it on
// port (0 picks a free one; a lost server's port lets clients keep their
// host list) with the extra settings given. The standby connects to c as
// application_name name (its cluster_name), which c's
// synchronous_standby_names may list to make commits wait for it.
func (c *Cluster) StartStandby(ctx context.Context, dir string, port int, name string, settings ...string) (*Cluster, error) {
	s, err := newCluster(dir, port, append([]string{"cluster_name=" + name}, settings...))
	if err != nil {
		return nil, err
	}
	if err := s.mkdir(ctx); err != nil {
		return nil, err
	}
	if err := s.run(ctx, filepath.Join(s.bin, "pg_basebackup"), "-D", s.Dir, "-R", "-X", "stream",
		"--checkpoint=fast", "--no-sync", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres"); err != nil {
		return nil, fmt.Errorf("copying the primary into %s: %w", s.Dir, err)
	}
	if err := s.Restart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Promote ends recovery on a standby (pg_ctl promote) and waits until it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.Dir, "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("promoting the standby in %s: %w", c.Dir, err)
	}
	return nil
}

// KillPostmaster sends SIGKILL to the postmaster alone, as the loss of its
// machine would look to clients: no shutdown, and its backends end as they
// notice it gone, abandoning commits that still wait for a synchronous
// standby. The data directory stays; Remove cleans it up.
func (c *Cluster) KillPostmaster() error {
	pids, err := c.pids()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the postmaster: %w", err)
	}
	// Wait for it and its children to be gone, so the port is free and
	// nothing answers on it any more.
	for range 600 {
		alive := false
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				alive = true
			}
		}
		if !alive {
			return c.removeLockFiles()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("the killed postmaster's processes did not exit within 6 s")
}

// removeLockFiles deletes the lock files a killed postmaster leaves. Where
// nothing reaps orphans (a container whose init does not), the dead
// postmaster stays a zombie, which a new one would take for a live server
// holding the data directory and the socket.
func (c *Cluster) removeLockFiles() error {
	for _, name := range []string{"postmaster.pid", fmt.Sprintf(".s.PGSQL.%d.lock", c.Port)} {
		if err := os.Remove(filepath.Join(c.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the killed server's lock file: %w", err)
		}
	}
	return nil
}

// zombie reports whether pid has exited but is not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func (c *Cluster) mkdir(ctx context.Context) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.Dir, err)
	}
	if c.runAs != "" {
		if err := exec.CommandContext(ctx, "chown", c.runAs+":", c.Dir).Run(); err != nil {
			return fmt.Errorf("handing %s to %s: %w", c.Dir, c.runAs, err)
		}
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	if err := c.mkdir(ctx); err != nil {
		return err
	}
	if err := c.run(ctx, filepath.Join(c.bin, "initdb"), "-D", c.Dir, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		return fmt.Errorf("initdb in %s: %w", c.Dir, err)
	}
	return nil
}

// Restart starts the server again after Stop or Kill, on the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
		c.Port, c.Dir)
	for _, kv := range c.Settings {
		opts += " -c " + kv
	}
	if err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.Dir, "-l", filepath.Join(c.Dir, "server.log"),
		"-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("starting postgres in %s (log: %s): %w", c.Dir, filepath.Join(c.Dir, "server.log"), err)
	}
	return nil
}

// Stop shuts the server down, disconnecting clients (pg_ctl -m fast).
func (c *Cluster) Stop(ctx context.Context) error { return c.stop(ctx, "fast") }

// Kill stops the server without a clean shutdown (pg_ctl -m immediate), as a
// crash would.
func (c *Cluster) Kill(ctx context.Context) error { return c.stop(ctx, "immediate") }

func (c *Cluster) stop(ctx context.Context, mode string) error {
	if err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.Dir, "-m", mode, "-w", "stop"); err != nil {
		return fmt.Errorf("stopping postgres in %s: %w", c.Dir, err)
	}
	return nil
}

// Remove stops the server if it runs and deletes its directory.
func (c *Cluster) Remove(ctx context.Context) error {
	_ = c.stop(ctx, "immediate")
	return os.RemoveAll(c.Dir)
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	if c.runAs != "" {
		args = append([]string{"-u", c.runAs, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The server must outlive a Ctrl-C aimed at our process group until we
	// stop it ourselves, in order.
	cmd.SysProcAttr = detached()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// binDir finds the newest installed PostgreSQL's binaries.
func binDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries found (initdb); install them, e.g. apt-get install postgresql")
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Freeze stops the server and every backend with SIGSTOP, as a hung host
// would: connections stay open and nothing answers. The returned thaw
// resumes them (SIGCONT); call it before Stop or Remove.
func (c *Cluster) Freeze() (thaw func(), err error) {
	pids, err := c.pids()
	if err != nil {
		return nil, err
	}
	signal(pids, syscall.SIGSTOP)
	return func() { signal(pids, syscall.SIGCONT) }, nil
}

// pids returns the postmaster's pid and its children's.
func (c *Cluster) pids() ([]int, error) {
	raw, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("reading the server's pid: %w", err)
	}
	master, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return nil, fmt.Errorf("reading the server's pid: %w", err)
	}
	pids := []int{master}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Fields after the parenthesized command: state, ppid, ...
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(master) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func signal(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// SetReadOnly makes every new transaction on c read-only, or writable
// again (default_transaction_read_only, reloaded), as a demotion does to
// the sessions that outlive it.
func (c *Cluster) SetReadOnly(ctx context.Context, on bool) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to set read-only: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET default_transaction_read_only = %t", on)); err != nil {
		return fmt.Errorf("setting read-only %t: %w", on, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reloading the configuration: %w", err)
	}
	return nil
}
