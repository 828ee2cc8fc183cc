// Package lab is the Webhook Retry Lab of docs/lab.md, `devtool lab`: five
// designs of a webhook receiver (hookgate the fifth) against concurrent
// copies, a lost ack and crashes before and after the side effect, each
// design a process of its own (devtool's hidden DesignCommand) so that a
// crash is a real SIGKILL; a table and an HTML report of what each lost or
// repeated.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// labDB is the database the lab creates, on the server DATABASE_URL names
// or on devtool's own Postgres, and drops afterwards.
const labDB = "hookgate_lab"

// labDefaultCopies is how many copies the copies scenario sends by default.
const labDefaultCopies = 5

// Run is `devtool lab`: it makes a database of its own on the local
// system's Postgres (started from .local/pg unless it runs already, or the
// server DATABASE_URL names), runs the matrix of designs and scenarios,
// prints the table, writes the HTML report, and stops and drops what it
// started.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := devlocal.NewFlagSet("lab", "lab [--scenario LIST] [--design LIST] [--copies N] [--bin DIR] [--out DIR] [--keep-database]", stderr)
	scenarioList := fs.String("scenario", "all", "scenarios to run, comma-separated: "+strings.Join(scenarioNames(), ", ")+", or all")
	designList := fs.String("design", "all", "designs to run, comma-separated: "+strings.Join(designNames(), ", ")+", or all")
	copies := fs.Int("copies", labDefaultCopies, "copies of the event the copies scenario sends at once (2 to 50)")
	binDir := fs.String("bin", filepath.Join(devlocal.Dir, "bin"), "directory holding the built ingest and worker")
	outDir := fs.String("out", filepath.Join(devlocal.Dir, "lab"), "where the report, hookgate's config and the processes' log go")
	keep := fs.Bool("keep-database", false, "keep the lab's database afterwards, for a look at the designs' tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("lab takes no arguments, got %q", fs.Args())
	}
	scenarios, err := pickNames("--scenario", *scenarioList, scenarioNames())
	if err != nil {
		return err
	}
	designs, err := pickNames("--design", *designList, designNames())
	if err != nil {
		return err
	}
	if *copies < 2 || *copies > 50 {
		return fmt.Errorf("--copies must be between 2 and 50, got %d", *copies)
	}
	ingestBin, workerBin := filepath.Join(*binDir, "ingest"), filepath.Join(*binDir, "worker")
	for _, bin := range []string{ingestBin, workerBin} {
		if err := devlocal.CheckExecutable(bin); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding devtool's own binary for the designs: %w", err)
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(*outDir, "processes.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	con := devlocal.NewConsole(stdout)

	adminURL, stopPG, err := labPostgres(ctx, con, getenv)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopPG()) }()
	dbURL, err := devlocal.RecreateDatabase(ctx, adminURL, labDB)
	if err != nil {
		return err
	}
	if !*keep {
		defer func() { err = errors.Join(err, devlocal.DropDatabase(context.WithoutCancel(ctx), adminURL, labDB)) }()
	}
	logs := devlocal.NewConsole(logFile)
	// Migrating needs a valid config, not a reachable route: the lab's
	// hookgate config is written again, with the downstream's address,
	// before ingest and worker start.
	cfgPath := filepath.Join(*outDir, "hookgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(hookgateConfig("http://127.0.0.1:1")), 0o600); err != nil {
		return err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + dbURL, "HOOKGATE_CONFIG=" + cfgPath, "LAB_WEBHOOK_SECRET=whsec_" + strings.Repeat("A", 43) + "="}
	if err := devlocal.RunOnce(ctx, logs, 30*time.Second, "migrate", ingestBin, []string{"migrate"}, env); err != nil {
		return fmt.Errorf("migrating the lab's database (see %s): %w", logPath, err)
	}
	con.Printf("lab", "database %s ready; %d designs × %d scenarios, %d copies; the processes' output goes to %s",
		labDB, len(designs), len(scenarios), *copies, logPath)

	started := time.Now()
	results, runErr := runLab(ctx, labOptions{
		dbURL: dbURL, self: self, selfEnv: os.Environ(), ingestBin: ingestBin, workerBin: workerBin,
		workDir: *outDir, designs: designs, scenarios: scenarios, copies: *copies, logs: logs, con: con,
	})
	took := time.Since(started).Round(time.Second)
	fmt.Fprintf(stdout, "\n%s\n", labTable(results, designs, scenarios))
	reportPath := filepath.Join(*outDir, "report.html")
	if err := writeLabReport(reportPath, results, designs, scenarios, *copies, took); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stdout, "took %s; the report, with a chart per scenario and why each cell came out so: %s\n", took, reportPath)
	if ctx.Err() != nil {
		return errors.New("interrupted: the table holds the cells that ended; every process the lab started is stopped")
	}
	if runErr != nil {
		return fmt.Errorf("the lab did not run every cell (see %s): %w", logPath, runErr)
	}
	if failed := labFailures(results); len(failed) > 0 {
		return fmt.Errorf("%d cell(s) could not be measured: %s (see %s)", len(failed), strings.Join(failed, "; "), logPath)
	}
	return nil
}

// labPostgres returns the URL of a maintenance database for the lab: the
// server DATABASE_URL names; else devtool's own Postgres in devlocal.PGDir, used as
// it is when it already runs (a `make run` beside the lab) and otherwise
// started, and then stopped by the function returned.
func labPostgres(ctx context.Context, con *devlocal.Console, getenv func(string) string) (string, func() error, error) {
	noop := func() error { return nil }
	if u := getenv("DATABASE_URL"); u != "" {
		con.Printf("lab", "using the Postgres server DATABASE_URL names")
		return u, noop, nil
	}
	if devlocal.ServerRunning(devlocal.PGDir) {
		con.Printf("lab", "using the local Postgres already running from %s", devlocal.PGDir)
		return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: fmt.Sprintf("127.0.0.1:%d", devlocal.PGPort), Path: "/postgres", RawQuery: "sslmode=disable"}).String(), noop, nil
	}
	cluster, err := devlocal.StartCluster(ctx, con, devlocal.PGDir, devlocal.PGPort)
	if err != nil {
		return "", nil, err
	}
	return cluster.URL("postgres"), func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := cluster.Stop(sctx); err != nil {
			return err
		}
		con.Printf("lab", "stopped the Postgres it started")
		return nil
	}, nil
}

// pickNames parses a comma-separated list of names, or "all".
func pickNames(flagName, list string, known []string) ([]string, error) {
	if list == "all" {
		return known, nil
	}
	var picked []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%s: no %q; choose from %s, or all", flagName, n, strings.Join(known, ", "))
		}
		if !slices.Contains(picked, n) {
			picked = append(picked, n)
		}
	}
	// The table's order, whatever the flag's.
	slices.SortFunc(picked, func(a, b string) int { return slices.Index(known, a) - slices.Index(known, b) })
	return picked, nil
}

func scenarioNames() []string {
	var names []string
	for _, s := range labScenarios {
		names = append(names, s.name)
	}
	return names
}

func designNames() []string {
	var names []string
	for _, d := range labDesigns {
		names = append(names, d.name)
	}
	return names
}

// labFailures names the cells the lab could not measure.
func labFailures(results []labResult) []string {
	var failed []string
	for _, r := range results {
		if r.failure != "" {
			failed = append(failed, r.design+" × "+r.scenario+": "+r.failure)
		}
	}
	return failed
}
