package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/devsecret"
)

const (
	// localDir holds what devtool makes (binaries, the Postgres cluster); it
	// is gitignored.
	localDir = ".local"
	// pgDir is the data directory of devtool's Postgres, kept between runs.
	pgDir = localDir + "/pg"
	// pgPort is the port of devtool's Postgres, fixed so that DATABASE_URL
	// stays the same from run to run.
	pgPort = 54329
	// minStopGrace is how long a child may take to stop after SIGTERM; it is
	// raised to the worker's shutdown_timeout plus 5s when that is longer.
	minStopGrace = 35 * time.Second
	// healthTimeout bounds the wait for each process's /healthz.
	healthTimeout = time.Minute
)

// runSystem is `devtool run`: it starts Postgres (unless DATABASE_URL is
// set), migrates, starts the receiver, worker and ingest, waits until each
// answers /healthz, and then until Ctrl-C or a child's exit. It stops
// everything on the way out: ingest, worker, receiver, Postgres.
func runSystem(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("run", "run [--config FILE] [--bin DIR]", stderr)
	configPath := fs.String("config", "hookgate.example.yaml", "config file for ingest and worker")
	binDir := fs.String("bin", filepath.Join(localDir, "bin"), "directory holding the built ingest and worker")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run takes no arguments, got %q", fs.Args())
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	ingestBin, workerBin := filepath.Join(*binDir, "ingest"), filepath.Join(*binDir, "worker")
	for _, bin := range []string{ingestBin, workerBin} {
		if err := checkExecutable(bin); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding devtool's own binary for the receiver: %w", err)
	}
	ingestURL, workerURL := localURL(cfg.Ingest.Listen), localURL(cfg.Worker.Listen)
	receiverURL := "http://" + receiverAddr
	for _, addr := range []struct{ name, listen string }{
		{"ingest", cfg.Ingest.Listen}, {"worker", cfg.Worker.Listen}, {"receiver", receiverAddr},
	} {
		if err := checkFree(addr.listen); err != nil {
			return fmt.Errorf("%s cannot listen on %s: %w (is another `make run` still running?)", addr.name, addr.listen, err)
		}
	}

	con := &console{w: stdout}
	// interrupted ends the run after a Ctrl-C during start-up; the deferred
	// stops take down whatever had started.
	interrupted := func() error {
		con.printf("devtool", "interrupted while starting; stopping")
		return nil
	}
	secrets := demoSecrets(cfg, getenv)
	con.printf("devtool", "%s", demoSecretsNotice(secrets))
	consoleEnv, logins, err := devsecret.Console(cfg, getenv, localDir)
	if err != nil {
		return err
	}

	dbURL := getenv("DATABASE_URL")
	if dbURL != "" {
		con.printf("devtool", "using DATABASE_URL from the environment; no local Postgres started")
	} else {
		cluster, cerr := startCluster(ctx, con, pgDir, pgPort)
		if cerr != nil {
			return cerr
		}
		defer func() {
			con.printf("devtool", "stopping Postgres")
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if serr := cluster.Stop(sctx); serr != nil {
				err = errors.Join(err, serr)
				return
			}
			con.printf("devtool", "Postgres stopped")
		}()
		dbURL = cluster.URL("postgres")
		con.printf("devtool", "Postgres is up (log: %s): DATABASE_URL=%s", filepath.Join(pgDir, "server.log"), dbURL)
		if ctx.Err() != nil {
			return interrupted()
		}
	}

	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"HOOKGATE_LOG_FORMAT="+cmp.Or(getenv("HOOKGATE_LOG_FORMAT"), "text"))
	for name, value := range secrets {
		env = append(env, name+"="+value)
	}
	for name, value := range consoleEnv {
		env = append(env, name+"="+value)
	}
	grace := max(minStopGrace, cfg.Worker.ShutdownTimeout.D()+5*time.Second)

	if err := runOnce(ctx, con, grace, "migrate", ingestBin, []string{"migrate", "--config", *configPath}, env); err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return fmt.Errorf("migrating the database: %w", err)
	}

	sup := newSupervisor(con, grace)
	defer func() { err = errors.Join(err, sup.stopAll()) }()
	children := []struct {
		name, path string
		args       []string
		health     string
	}{
		{"receiver", self, []string{"receive", "--listen", receiverAddr}, receiverURL + "/healthz"},
		{"worker", workerBin, []string{"--config", *configPath}, workerURL + "/healthz"},
		{"ingest", ingestBin, []string{"--config", *configPath}, ingestURL + "/healthz"},
	}
	for _, c := range children {
		if err := sup.start(c.name, c.path, c.args, env); err != nil {
			return err
		}
	}
	for _, c := range children {
		if err := waitHealthy(ctx, sup, c.name, c.health); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return err
		}
	}

	// A DATABASE_URL of the user's may hold a password: it is not printed.
	shownURL := "$DATABASE_URL"
	if getenv("DATABASE_URL") == "" {
		shownURL = dbURL
	}
	con.plain(banner(cfg, ingestURL, workerURL, receiverURL, getenv("HOOKGATE_UI_PASSWORD") != "", logins) +
		claimsHelp(shownURL, filepath.Join(*binDir, "worker"), *configPath))

	select {
	case <-ctx.Done():
		con.printf("devtool", "stopping: ingest, worker, receiver, then Postgres (each gets up to %s)", grace)
		return nil
	case p := <-sup.exited:
		return fmt.Errorf("%s exited unexpectedly (%s; its output is above); stopped the rest", p.name, exitText(p.err))
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

// checkExecutable reports a missing binary with how to build it.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not built (no executable at %s); build the binaries first: go build -o %s/ ./cmd/ingest ./cmd/worker ./cmd/devtool (make run does this)",
			filepath.Base(path), path, filepath.Dir(path))
	}
	return nil
}

// checkFree reports whether addr can be listened on, by doing so briefly.
func checkFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
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

// waitHealthy polls url until it answers 200, failing early when a child
// exits or ctx ends.
func waitHealthy(ctx context.Context, sup *supervisor, name, url string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(healthTimeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("checking %s: %w", name, err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s with 200 within %s", name, url, healthTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-sup.exited:
			return fmt.Errorf("%s exited while starting (%s; its output is above)", p.name, exitText(p.err))
		case <-tick.C:
		}
	}
}
