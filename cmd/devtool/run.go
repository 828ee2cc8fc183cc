package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/devlocal"
	"github.com/hookgate/hookgate/internal/devsecret"
)

const (
	// minStopGrace is how long a child may take to stop after SIGTERM; it is
	// raised to the worker's shutdown_timeout plus 5s when that is longer.
	minStopGrace = 35 * time.Second
)

// runSystem is `devtool run`: it starts Postgres (unless DATABASE_URL is
// set), migrates, starts the receiver, worker and ingest, waits until each
// answers /healthz, and then until Ctrl-C or a child's exit. It stops
// everything on the way out: ingest, worker, receiver, Postgres.
func runSystem(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, err := parseRunOptions(args, getenv, stderr)
	if err != nil {
		return err
	}

	con := devlocal.NewConsole(stdout)
	// interrupted ends the run after a Ctrl-C during start-up; the deferred
	// stops take down whatever had started.
	interrupted := func() error {
		con.Printf("devtool", "interrupted while starting; stopping")
		return nil
	}
	secrets := demoSecrets(o.cfg, getenv)
	con.Printf("devtool", "%s", demoSecretsNotice(secrets))
	consoleEnv, logins, err := devsecret.Console(o.cfg, getenv, devlocal.Dir)
	if err != nil {
		return err
	}

	dbURL, stopPostgres, err := runPostgres(ctx, con, getenv)
	if err != nil {
		return err
	}
	if stopPostgres != nil {
		defer func() {
			if serr := stopPostgres(); serr != nil {
				err = errors.Join(err, serr)
			}
		}()
		if ctx.Err() != nil {
			return interrupted()
		}
	}

	env := runEnv(getenv, dbURL, secrets, consoleEnv)
	grace := max(minStopGrace, o.cfg.Worker.ShutdownTimeout.D()+5*time.Second)

	if err := devlocal.RunOnce(ctx, con, grace, "migrate", o.ingestBin, []string{"migrate", "--config", o.configPath}, env); err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return fmt.Errorf("migrating the database: %w", err)
	}

	sup := devlocal.NewSupervisor(con, grace)
	defer func() { err = errors.Join(err, sup.StopAll()) }()
	children := o.children()
	if err := startChildren(sup, children, env); err != nil {
		return err
	}
	if err := waitChildren(ctx, sup, children); err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return err
	}

	// A DATABASE_URL of the user's may hold a password: it is not printed.
	shownURL := "$DATABASE_URL"
	if getenv("DATABASE_URL") == "" {
		shownURL = dbURL
	}
	con.Plain(banner(o.cfg, o.ingestURL, o.workerURL, o.receiverURL, getenv("HOOKGATE_UI_PASSWORD") != "", logins) +
		claimsHelp(shownURL, filepath.Join(o.binDir, "worker"), o.configPath))
	if host, _, _ := net.SplitHostPort(o.workerListen); !isLoopback(host) {
		con.Printf("devtool", "ingest and the worker listen on %s (--host / HOOKGATE_RUN_HOST): the console and its password are reachable from the network", host)
	}
	return untilDone(ctx, con, sup, grace)
}

// defaultRunHost is the host `devtool run` serves ingest and the worker
// on: this machine only, since the console's password is printed in the
// banner. HOOKGATE_RUN_HOST or --host listen elsewhere.
const defaultRunHost = "127.0.0.1"

// runOptions is what `devtool run` runs: its flags, the config they name,
// the binaries, the addresses the processes listen on and the URLs they
// answer on.
type runOptions struct {
	configPath, binDir string
	cfg                *config.Config
	// ingestBin and workerBin are the built binaries; self is devtool's
	// own, which runs the receiver.
	ingestBin, workerBin, self string
	// ingestListen and workerListen are the config's ports on --host;
	// receiverListen is always on the loopback.
	ingestListen, workerListen, receiverListen string
	ingestURL, workerURL, receiverURL          string
}

// parseRunOptions reads run's flags and config, and checks that the
// binaries are built and every listen address is free, before anything is
// started. Ingest and the worker listen on the config's ports on --host
// (127.0.0.1 unless HOOKGATE_RUN_HOST says otherwise), whatever host the
// config names: the example config's ":8080" would be every interface.
func parseRunOptions(args []string, getenv func(string) string, stderr io.Writer) (*runOptions, error) {
	fs := devlocal.NewFlagSet("run", "run [--config FILE] [--bin DIR] [--host HOST]", stderr)
	configPath := fs.String("config", "hookgate.example.yaml", "config file for ingest and worker")
	binDir := fs.String("bin", filepath.Join(devlocal.Dir, "bin"), "directory holding the built ingest and worker")
	host := fs.String("host", cmp.Or(getenv("HOOKGATE_RUN_HOST"), defaultRunHost),
		"host ingest and the worker listen on (0.0.0.0 for every interface); also HOOKGATE_RUN_HOST")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("run takes no arguments, got %q", fs.Args())
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return nil, err
	}
	ingestBin, workerBin := filepath.Join(*binDir, "ingest"), filepath.Join(*binDir, "worker")
	for _, bin := range []string{ingestBin, workerBin} {
		if err := devlocal.CheckExecutable(bin); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding devtool's own binary for the receiver: %w", err)
	}
	ingestListen, err := onHost(*host, cfg.Ingest.Listen)
	if err != nil {
		return nil, fmt.Errorf("ingest.listen: %w", err)
	}
	workerListen, err := onHost(*host, cfg.Worker.Listen)
	if err != nil {
		return nil, fmt.Errorf("worker.listen: %w", err)
	}
	for _, addr := range []struct{ name, listen string }{
		{"ingest", ingestListen}, {"worker", workerListen}, {"receiver", receiverAddr},
	} {
		if err := devlocal.CheckFree(addr.listen); err != nil {
			return nil, fmt.Errorf("%s cannot listen on %s: %w (is another `make run` still running?)", addr.name, addr.listen, err)
		}
	}
	return &runOptions{
		configPath: *configPath, binDir: *binDir, cfg: cfg,
		ingestBin: ingestBin, workerBin: workerBin, self: self,
		ingestListen: ingestListen, workerListen: workerListen, receiverListen: receiverAddr,
		ingestURL: localURL(ingestListen), workerURL: localURL(workerListen), receiverURL: "http://" + receiverAddr,
	}, nil
}

// isLoopback reports whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// onHost is listen's port on host.
func onHost(host, listen string) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", listen, err)
	}
	return net.JoinHostPort(host, port), nil
}

// runEnv is the environment of the processes `devtool run` starts:
// devtool's own, with the database, the log format, and the demo and
// console secrets added.
func runEnv(getenv func(string) string, dbURL string, secrets, consoleEnv map[string]string) []string {
	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"HOOKGATE_LOG_FORMAT="+cmp.Or(getenv("HOOKGATE_LOG_FORMAT"), "text"))
	for name, value := range secrets {
		env = append(env, name+"="+value)
	}
	for name, value := range consoleEnv {
		env = append(env, name+"="+value)
	}
	return env
}

// runChild is one process `devtool run` starts, and the URL that answers
// 200 once it is up.
type runChild struct {
	name, path string
	args       []string
	health     string
}

// children are the processes `devtool run` starts, in the order they
// start: the supervisor stops them in reverse.
func (o *runOptions) children() []runChild {
	return []runChild{
		{"receiver", o.self, []string{"receive", "--listen", o.receiverListen}, o.receiverURL + "/healthz"},
		{"worker", o.workerBin, []string{"--config", o.configPath, "--listen", o.workerListen}, o.workerURL + "/healthz"},
		{"ingest", o.ingestBin, []string{"--config", o.configPath, "--listen", o.ingestListen}, o.ingestURL + "/healthz"},
	}
}

// startChildren starts every child, in order, before any is waited for.
func startChildren(sup *devlocal.Supervisor, children []runChild, env []string) error {
	for _, c := range children {
		if err := sup.Start(c.name, c.path, c.args, env); err != nil {
			return err
		}
	}
	return nil
}

// waitChildren waits until every child answers its /healthz.
func waitChildren(ctx context.Context, sup *devlocal.Supervisor, children []runChild) error {
	for _, c := range children {
		if err := devlocal.WaitHealthy(ctx, sup, c.name, c.health); err != nil {
			return err
		}
	}
	return nil
}

// untilDone waits for Ctrl-C or a child's exit; runSystem's deferred stops
// then take everything down.
func untilDone(ctx context.Context, con *devlocal.Console, sup *devlocal.Supervisor, grace time.Duration) error {
	select {
	case <-ctx.Done():
		con.Printf("devtool", "stopping: ingest, worker, receiver, then Postgres (each gets up to %s)", grace)
		return nil
	case p := <-sup.Exited():
		return fmt.Errorf("%s exited unexpectedly (%s; its output is above); stopped the rest", p.Name(), p.ExitText())
	}
}

// banner tells what runs where, once everything answers /healthz.
func banner(cfg *config.Config, ingestURL, workerURL, receiverURL string, ui bool, logins []devsecret.Login) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nhookgate is running (Ctrl-C stops everything):\n")
	for _, p := range cfg.Providers {
		fmt.Fprintf(&b, "  ingest    %s/webhooks/%s\n", ingestURL, p.Name)
	}
	fmt.Fprintf(&b, "  worker    %s  (/healthz, /readyz, /metrics)\n", workerURL)
	b.WriteString(devsecret.Banner(cfg, workerURL, logins))
	if ui {
		fmt.Fprintf(&b, "  River UI  %s/riverui/  (user admin, password $HOOKGATE_UI_PASSWORD)\n", workerURL)
	} else {
		fmt.Fprintf(&b, "  River UI  off; set HOOKGATE_UI_PASSWORD to serve it at %s/riverui/\n", workerURL)
	}
	fmt.Fprintf(&b, "  receiver  %s  (demo downstream; prints each delivery)\n", receiverURL)
	fmt.Fprintf(&b, "\nsend a signed demo event twice: make send-demo\n")
	return b.String()
}

// claimsHelp tells how to reach this system's claims with `worker claims`.
func claimsHelp(dbURL, workerBin, configPath string) string {
	return fmt.Sprintf(`inspect and retry claims in this database:
  make claims ARGS='list'        (also: ARGS='show PROVIDER EVENT_ID', ARGS='retry --status failed')
  which runs: DATABASE_URL='%s' %s --config %s claims list

`, dbURL, workerBin, configPath)
}

// localURL turns a listen address into a URL on this machine: a missing or
// wildcard host becomes 127.0.0.1.
func localURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
