package main

import (
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
