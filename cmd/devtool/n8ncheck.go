package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// What `devtool n8n-check` installs and runs.
const (
	// n8nVersion is the n8n release docs/n8n.md is checked against: the
	// newest that runs on Node 20.
	n8nVersion = "1.123.81"
	// n8nXLSXVersion replaces n8n's xlsx dependency, whose tarball n8n
	// names on a host outside the npm registry; this is the newest xlsx
	// the registry serves.
	n8nXLSXVersion = "0.18.5"
	// n8nMinNode is the oldest Node.js n8nVersion runs on.
	n8nMinNode = "20.19"
	// n8nHookgateDB and n8nDB are the databases the check creates, on the
	// server DATABASE_URL names or on devtool's own Postgres.
	n8nHookgateDB = "hookgate_n8n_check"
	n8nDB         = "n8n_check"
)

// n8nCheckTimeout bounds each wait of the check: the machine may be slow,
// and n8n takes a while to start.
const n8nCheckTimeout = 3 * time.Minute

// n8nCheck is `devtool n8n-check`: it installs a pinned n8n into dir,
// imports the check's workflows, runs ingest, worker and n8n on loopback
// ports, sends the scenarios' events, counts n8n's executions in n8n's own
// database, prints a table, and stops everything it started.
func n8nCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("n8n-check", "n8n-check [--bin DIR] [--dir DIR] [--guide FILE] [--keep-databases]", stderr)
	binDir := fs.String("bin", filepath.Join(localDir, "bin"), "directory holding the built ingest and worker")
	dir := fs.String("dir", filepath.Join(localDir, "n8n"), "where n8n is installed and the check keeps its files")
	guide := fs.String("guide", "docs/n8n.md", "the guide whose worked example is run")
	keep := fs.Bool("keep-databases", false, "keep the check's two databases afterwards, for a look at them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("n8n-check takes no arguments, got %q", fs.Args())
	}
	ingestBin, workerBin := filepath.Join(*binDir, "ingest"), filepath.Join(*binDir, "worker")
	for _, bin := range []string{ingestBin, workerBin} {
		if err := checkExecutable(bin); err != nil {
			return err
		}
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	guideText, err := os.ReadFile(*guide)
	if err != nil {
		return fmt.Errorf("reading the guide: %w", err)
	}
	con := &console{w: stdout}

	if err := checkNode(ctx, con); err != nil {
		return err
	}
	if err := installN8n(ctx, con, absDir); err != nil {
		return err
	}

	// Postgres: the server DATABASE_URL names, or devtool's own.
	adminURL := getenv("DATABASE_URL")
	if adminURL != "" {
		con.printf("n8n-check", "using the Postgres server DATABASE_URL names")
	} else {
		cluster, cerr := startCluster(ctx, con, pgDir, pgPort)
		if cerr != nil {
			return cerr
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err = errors.Join(err, cluster.Stop(sctx))
			con.printf("n8n-check", "stopped Postgres")
		}()
		adminURL = cluster.URL("postgres")
		con.printf("n8n-check", "started Postgres from %s", pgDir)
	}
	hgURL, err := recreateDatabase(ctx, adminURL, n8nHookgateDB)
	if err != nil {
		return err
	}
	n8nURL, err := recreateDatabase(ctx, adminURL, n8nDB)
	if err != nil {
		return err
	}
	con.printf("n8n-check", "created databases %s (hookgate) and %s (n8n, since its sqlite3 build is skipped)", n8nHookgateDB, n8nDB)
	if !*keep {
		defer func() {
			for _, db := range []string{n8nHookgateDB, n8nDB} {
				err = errors.Join(err, dropDatabase(context.WithoutCancel(ctx), adminURL, db))
			}
		}()
	}

	work := filepath.Join(absDir, "check")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(work, "home"), 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(work, "processes.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	logs := &console{w: logFile}

	// Loopback addresses, picked free now.
	ingestAddr, workerAddr, n8nAddr, brokerAddr := freeLoopback(), freeLoopback(), freeLoopback(), freeLoopback()
	for _, a := range []string{ingestAddr, workerAddr, n8nAddr, brokerAddr} {
		if a == "" {
			return errors.New("no free loopback port")
		}
	}
	rec := newRecorder()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the check's APIs: %w", err)
	}
	apiSrv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = apiSrv.Serve(ln) }()
	defer apiSrv.Close()
	apiURL := "http://" + ln.Addr().String()
	n8nBase := "http://" + n8nAddr

	secrets := map[string]string{
		"STRIPE_WEBHOOK_SECRET": "whsec_" + randomHex(16),
		"SHIPPER_AUTHORIZATION": "Bearer sk_check_" + randomHex(8),
		"N8N_WEBHOOK_TOKEN":     randomHex(16),
	}
	rec.shipperAuth, rec.log = secrets["SHIPPER_AUTHORIZATION"], logs
	cfgYAML, err := n8nCheckConfig(guideText, ingestAddr, workerAddr, apiURL, n8nBase)
	if err != nil {
		return err
	}
	if _, err := config.Parse(cfgYAML); err != nil {
		return fmt.Errorf("the check's config (the guide's worked example and the check's routes): %w", err)
	}
	cfgPath := filepath.Join(work, "hookgate.yaml")
	if err := os.WriteFile(cfgPath, cfgYAML, 0o600); err != nil {
		return err
	}

	// n8n: its workflows and credential, imported while it is stopped.
	n8nEnv, err := n8nEnvironment(n8nURL, filepath.Join(work, "home"), n8nAddr, brokerAddr)
	if err != nil {
		return err
	}
	n8nBin := filepath.Join(absDir, "node_modules", ".bin", "n8n")
	wfJSON, err := n8nWorkflowsJSON(checkWorkflows(), apiURL)
	if err != nil {
		return err
	}
	credJSON, err := n8nCredentialsJSON("X-Hookgate-Token", secrets["N8N_WEBHOOK_TOKEN"])
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "workflows.json"), wfJSON, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "credentials.json"), credJSON, 0o600); err != nil {
		return err
	}
	for _, step := range [][]string{
		{"import:credentials", "--input=" + filepath.Join(work, "credentials.json")},
		{"import:workflow", "--input=" + filepath.Join(work, "workflows.json")},
		{"update:workflow", "--all", "--active=true"},
	} {
		con.printf("n8n-check", "n8n %s", step[0]+" "+strings.Join(step[1:], " "))
		if err := runOnce(ctx, logs, 30*time.Second, "n8n "+step[0], n8nBin, step, n8nEnv); err != nil {
			return fmt.Errorf("n8n %s failed (see %s): %w", step[0], logPath, err)
		}
	}
	// The credential holds the token in the clear; n8n keeps it encrypted.
	if err := os.Remove(filepath.Join(work, "credentials.json")); err != nil {
		return err
	}

	// hookgate.
	hgEnv := []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + hgURL, "HOOKGATE_CONFIG=" + cfgPath, "HOOKGATE_LOG_FORMAT=text"}
	for k, v := range secrets {
		hgEnv = append(hgEnv, k+"="+v)
	}
	if err := runOnce(ctx, logs, 30*time.Second, "migrate", ingestBin, []string{"migrate"}, hgEnv); err != nil {
		return fmt.Errorf("migrating hookgate's database (see %s): %w", logPath, err)
	}
	sup := newSupervisor(logs, 40*time.Second)
	defer func() {
		con.printf("n8n-check", "stopping ingest and worker")
		err = errors.Join(err, sup.stopAll())
	}()
	for _, c := range []struct{ name, bin, health string }{
		{"worker", workerBin, "http://" + workerAddr + "/healthz"},
		{"ingest", ingestBin, "http://" + ingestAddr + "/healthz"},
	} {
		if err := sup.start(c.name, c.bin, nil, hgEnv); err != nil {
			return err
		}
		if err := waitHealthy(ctx, sup, c.name, c.health); err != nil {
			return fmt.Errorf("%w (see %s)", err, logPath)
		}
	}
	con.printf("n8n-check", "ingest on %s, worker on %s, the check's APIs on %s", ingestAddr, workerAddr, ln.Addr())

	n := &n8nProc{con: con, logs: logs, bin: n8nBin, env: n8nEnv, base: n8nBase, logPath: logPath}
	defer func() { err = errors.Join(err, n.stop()) }()
	if _, err := n.start(ctx); err != nil {
		return err
	}

	hgPool, err := pgxpool.New(ctx, hgURL)
	if err != nil {
		return err
	}
	defer hgPool.Close()
	n8nPool, err := pgxpool.New(ctx, n8nURL)
	if err != nil {
		return err
	}
	defer n8nPool.Close()
	c := &n8nChecker{
		con: con, rec: rec, n8n: n, store: claim.NewStore(hgPool, nil, nil), n8nDB: n8nPool,
		ingest: "http://" + ingestAddr + "/webhooks/stripe", secret: secrets["STRIPE_WEBHOOK_SECRET"],
		token: secrets["N8N_WEBHOOK_TOKEN"], workerBin: workerBin, hgEnv: hgEnv,
	}
	rows := c.run(ctx)
	fmt.Fprintf(stdout, "\nn8n %s on Node %s; executions counted in n8n's execution_entity table:\n\n", n8nVersion, c.nodeVersion())
	fmt.Fprint(stdout, markdownTable(rows))
	if c.claimsShow != "" {
		fmt.Fprintf(stdout, "\nthe worked example's event, as `worker claims show` prints it:\n\n%s", c.claimsShow)
	}
	var failed []string
	for _, r := range rows {
		if r.verdict == verdictFailed {
			failed = append(failed, r.scenario)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d scenario(s) did not go as docs/n8n.md says: %s (logs: %s)", len(failed), strings.Join(failed, "; "), logPath)
	}
	fmt.Fprintf(stdout, "\nevery scenario went as docs/n8n.md says (logs: %s)\n", logPath)
	return nil
}

// checkNode reports a Node.js or npm too old or missing for n8nVersion.
func checkNode(ctx context.Context, con *console) error {
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return fmt.Errorf("n8n needs Node.js %s or newer, and `node --version` failed: %w", n8nMinNode, err)
	}
	v := strings.TrimSpace(string(out))
	if !versionAtLeast(strings.TrimPrefix(v, "v"), n8nMinNode) {
		return fmt.Errorf("n8n %s needs Node.js %s or newer; this is %s", n8nVersion, n8nMinNode, v)
	}
	npm, err := exec.CommandContext(ctx, "npm", "--version").Output()
	if err != nil {
		return fmt.Errorf("installing n8n needs npm, and `npm --version` failed: %w", err)
	}
	con.printf("n8n-check", "Node.js %s, npm %s", v, strings.TrimSpace(string(npm)))
	return nil
}

// versionAtLeast compares dotted numeric versions.
func versionAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		if i >= len(a) {
			return false
		}
		x, _ := strconv.Atoi(a[i])
		y, _ := strconv.Atoi(b[i])
		if x != y {
			return x > y
		}
	}
	return true
}

// n8nPackageJSON is the package.json the check installs n8n with.
func n8nPackageJSON() []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"name":         "hookgate-n8n-check",
		"private":      true,
		"dependencies": map[string]string{"n8n": n8nVersion},
		"overrides":    map[string]string{"xlsx": n8nXLSXVersion},
	}, "", "  ")
	return append(b, '\n')
}

// installedVersion is the version of the npm package name under dir's
// node_modules, or "" when it is not there.
func installedVersion(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

// installN8n installs n8nVersion into dir unless it is there already.
func installN8n(ctx context.Context, con *console, dir string) error {
	if v := installedVersion(dir, "n8n"); v == n8nVersion && installedVersion(dir, "xlsx") == n8nXLSXVersion {
		con.printf("n8n-check", "n8n %s is installed in %s", v, dir)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), n8nPackageJSON(), 0o644); err != nil {
		return err
	}
	con.printf("n8n-check", "installing n8n %s from the npm registry into %s: about 1.8 GB and several minutes", n8nVersion, dir)
	con.printf("n8n-check", "  npm install --ignore-scripts (native builds such as sqlite3 are skipped, so n8n uses Postgres)")
	con.printf("n8n-check", "  package.json overrides xlsx with %s from the registry (n8n's own comes from another host)", n8nXLSXVersion)
	cmd := exec.CommandContext(ctx, "npm", "install", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out := con.writer("npm")
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	out.flush()
	if err != nil {
		return fmt.Errorf("npm install of n8n %s in %s: %w", n8nVersion, dir, err)
	}
	if v := installedVersion(dir, "n8n"); v != n8nVersion {
		return fmt.Errorf("npm install finished, but %s holds n8n %q, not %s", dir, v, n8nVersion)
	}
	con.printf("n8n-check", "installed n8n %s", n8nVersion)
	return nil
}

// recreateDatabase drops and creates database name on the server adminURL
// names, and returns its URL.
func recreateDatabase(ctx context.Context, adminURL, name string) (string, error) {
	if err := dropDatabase(ctx, adminURL, name); err != nil {
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

func dropDatabase(ctx context.Context, adminURL, name string) error {
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

// freeLoopback returns a loopback address nothing listens on now, or "".
func freeLoopback() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// n8nEnvironment is n8n's environment: Postgres at dbURL, its files in
// home, its server on addr and its task broker (should runners be on) on
// brokerAddr, loopback only, nothing sent home.
func n8nEnvironment(dbURL, home, addr, brokerAddr string) ([]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, errors.New("the database URL is not a URL")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	_, n8nPort, _ := net.SplitHostPort(addr)
	_, brokerPort, _ := net.SplitHostPort(brokerAddr)
	pass, _ := u.User.Password()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"DB_TYPE=postgresdb",
		"DB_POSTGRESDB_HOST=" + host,
		"DB_POSTGRESDB_PORT=" + port,
		"DB_POSTGRESDB_DATABASE=" + strings.TrimPrefix(u.Path, "/"),
		"DB_POSTGRESDB_USER=" + u.User.Username(),
		"DB_POSTGRESDB_PASSWORD=" + pass,
		"N8N_USER_FOLDER=" + home,
		"N8N_LISTEN_ADDRESS=127.0.0.1",
		"N8N_HOST=127.0.0.1",
		"N8N_PORT=" + n8nPort,
		"N8N_PROTOCOL=http",
		"N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1",
		"N8N_RUNNERS_BROKER_PORT=" + brokerPort,
		// The default engine needs an isolate built by an install script,
		// which --ignore-scripts skips.
		"N8N_EXPRESSION_ENGINE=legacy",
		"N8N_ENCRYPTION_KEY=" + randomHex(24),
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS=true",
		"N8N_DIAGNOSTICS_ENABLED=false",
		"N8N_VERSION_NOTIFICATIONS_ENABLED=false",
		"N8N_TEMPLATES_ENABLED=false",
		"N8N_PERSONALIZATION_ENABLED=false",
		"N8N_PUBLIC_API_DISABLED=true",
		"N8N_GRACEFUL_SHUTDOWN_TIMEOUT=10",
		"EXECUTIONS_DATA_SAVE_ON_SUCCESS=all",
		"EXECUTIONS_DATA_SAVE_ON_ERROR=all",
	}
	return env, nil
}

// n8nCheckConfig is the check's hookgate config: the first yaml block of
// the guide (its worked example) with its addresses made local, and the
// check's own routes after it.
func n8nCheckConfig(guide []byte, ingestAddr, workerAddr, apiURL, n8nBase string) ([]byte, error) {
	_, rest, ok := bytes.Cut(guide, []byte("```yaml\n"))
	if !ok {
		return nil, errors.New("the guide has no yaml block")
	}
	block, _, ok := bytes.Cut(rest, []byte("```"))
	if !ok {
		return nil, errors.New("the guide's yaml block does not end")
	}
	s := string(block)
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`(?m)^(ingest:\n  listen: )"[^"]*"`), `${1}"` + ingestAddr + `"`},
		{regexp.MustCompile(`(?m)^(worker:\n  listen: )"[^"]*"`), `${1}"` + workerAddr + `"`},
		{regexp.MustCompile(`https://api\.shipper\.example`), apiURL},
		{regexp.MustCompile(`https://n8n\.example\.com`), n8nBase},
	} {
		if !r.re.MatchString(s) {
			return nil, fmt.Errorf("the guide's worked example no longer has %s", r.re)
		}
		s = r.re.ReplaceAllString(s, r.with)
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	var b strings.Builder
	b.WriteString(s)
	route := func(name, event, path string, timeout string, attempts int, retry404 bool, extra ...string) {
		fmt.Fprintf(&b, "  - name: %s\n    provider: stripe\n    events: [%q]\n    url: %s/webhook/%s\n    timeout: %s\n    max_attempts: %d\n    backoff: {initial: 1s, max: 2s}\n",
			name, event, n8nBase, path, timeout, attempts)
		if retry404 {
			b.WriteString("    retry_statuses: [404]\n")
		}
		// Each check route shows what happens to each delivery on its
		// own, so its circuit breaker is off: an n8n stopped for the
		// restart scenarios would open it.
		b.WriteString("    breaker: off\n")
		for _, e := range extra {
			b.WriteString("    " + e + "\n")
		}
	}
	b.WriteString("\n  # The check's routes.\n")
	route("check-duplicates", "check.duplicates", "hg-duplicates", "30s", 10, true)
	route("check-failing", "check.failing", "hg-failing", "30s", 10, true)
	route("check-respond-node", "check.respond-node", "hg-respond-node", "30s", 10, true)
	route("check-slow-short", "check.slow", "hg-slow-short", "3s", 3, true)
	route("check-slow-long", "check.slow", "hg-slow-long", "15s", 3, true)
	route("check-restart", "check.restart", "hg-restart", "30s", 40, true)
	route("check-restart-plain", "check.restart", "hg-restart-plain", "30s", 40, false)
	route("check-restart-paused", "check.restart-paused", "hg-restart-paused", "30s", 40, true)
	// docs/n8n.md's recommended setting.
	route("check-restart-success", "check.restart", "hg-restart-success", "30s", 40, true, n8nSuccess)
	route("check-respond-success", "check.respond-success", "hg-respond-success", "30s", 10, true, n8nSuccess)
	return []byte(b.String()), nil
}

// n8nSuccess is the success setting docs/n8n.md recommends.
const n8nSuccess = `success: '.body.ok == true'`

// n8nProc is n8n, started and stopped by the check.
type n8nProc struct {
	con, logs *console
	bin, base string
	env       []string
	logPath   string
	p         *proc
}

// startup is what n8n answered between taking its first connection and
// serving its webhooks.
type startup struct {
	// startingUp counts 200 "n8n is starting up. Please wait" answers,
	// given to any request before n8n has checked its database.
	startingUp int
	// notFound counts 404s, given until a workflow's webhook is registered.
	notFound int
	// window is how long n8n answered before it served the probe's webhook.
	window time.Duration
}

func (s startup) String() string {
	return fmt.Sprintf("answered for %s before serving webhooks: %d× 200 \"starting up\", %d× 404",
		s.window.Round(100*time.Millisecond), s.startingUp, s.notFound)
}

// launch starts n8n.
func (n *n8nProc) launch() error {
	n.con.printf("n8n-check", "starting n8n on %s", n.base)
	p, err := startProc(n.logs, "n8n", n.bin, []string{"start"}, n.env)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// start starts n8n and waits until it serves its webhooks.
func (n *n8nProc) start(ctx context.Context) (startup, error) {
	if err := n.launch(); err != nil {
		return startup{}, err
	}
	return n.waitWebhooks(ctx)
}

// get polls path until ok accepts the answer, for at most n8nCheckTimeout,
// failing early should n8n exit. seen is told of every answer.
func (n *n8nProc) get(ctx context.Context, path string, seen func(code int, body string), ok func(code int, body string) bool) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(n8nCheckTimeout)
	for {
		resp, err := client.Get(n.base + path)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			seen(resp.StatusCode, string(b))
			if ok(resp.StatusCode, string(b)) {
				return nil
			}
		}
		if n.p == nil || n.p.exited() {
			return fmt.Errorf("n8n exited while starting (see %s)", n.logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("n8n did not answer %s as expected within %s (see %s)", path, n8nCheckTimeout, n.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitWebhooks waits until n8n runs the probe workflow: its production
// webhooks are registered.
func (n *n8nProc) waitWebhooks(ctx context.Context) (startup, error) {
	var (
		st    startup
		first time.Time
	)
	err := n.get(ctx, "/webhook/hg-probe", func(code int, body string) {
		if first.IsZero() {
			first = time.Now()
		}
		switch {
		case code == http.StatusOK && strings.Contains(body, "starting up"):
			st.startingUp++
		case code == http.StatusNotFound:
			st.notFound++
		}
	}, func(code int, body string) bool {
		return code == http.StatusOK && strings.Contains(body, "Workflow was started")
	})
	if err != nil {
		return st, err
	}
	st.window = time.Since(first)
	n.con.printf("n8n-check", "n8n serves its webhooks; it %s", st)
	return st, nil
}

// stop stops n8n if it runs.
func (n *n8nProc) stop() error {
	if n.p == nil {
		return nil
	}
	n.con.printf("n8n-check", "stopping n8n")
	err := n.p.stop(30 * time.Second)
	n.p = nil
	return err
}
