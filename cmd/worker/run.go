package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/deliver"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/telemetry"
)

const usage = `worker [--config FILE] [--listen ADDR] [--cells NAME,...]
       worker migrate [--config FILE]
       ` + claimsUsage + `
       ` + routesUsage + `
       ` + reconcileUsage

// River fetch tuning. A committed claim's job insert sends a NOTIFY, so
// workers usually hear of new jobs at once; the cooldown bounds how often a
// worker fetches under load, the poll interval how late it notices a job
// whose NOTIFY it missed, or a retry that has come due. River fills free
// job slots only when it fetches, so under a backlog a long cooldown left
// slots empty for as long as the jobs ran (docs/benchmarks-history.md,
// "Where the time goes"). At 5 ms a busy queue fetches up to 200 times a
// second, each fetch one short statement.
const (
	fetchCooldown     = 5 * time.Millisecond
	fetchPollInterval = 200 * time.Millisecond
)

// Ops server bounds: how long /readyz and the backlog gauges wait for the
// database, and how long in-flight ops requests get at shutdown.
const (
	dbCheckTimeout = 2 * time.Second
	opsGrace       = 5 * time.Second
)

// run dispatches to a subcommand; without one, it serves. The common flags
// may come before the subcommand (`worker --config FILE claims list`) as
// well as after it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	env := cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr}
	var common cli.Common
	fs := cli.NewFlagSet("worker", usage, env, &common)
	fs.StringVar(&common.Listen, "listen", "", "ops listen address (overrides worker.listen)")
	var cellsFlag string
	fs.StringVar(&cellsFlag, "cells", "", "serve only these cells, comma separated (default: every cell)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return serve(ctx, common, cellsFlag, env)
	}
	command, rest := fs.Arg(0), fs.Args()[1:]
	switch command {
	case "migrate", "claims", "routes", "reconcile":
		if common.Listen != "" {
			return fmt.Errorf("--listen applies only when serving, not to %s (usage: %s)", command, usage)
		}
		if cellsFlag != "" {
			return fmt.Errorf("--cells applies only when serving, not to %s (usage: %s)", command, usage)
		}
	}
	switch command {
	case "migrate":
		return cli.Migrate(ctx, "worker", common, rest, env)
	case "claims":
		return dispatch(ctx, "claims", claimsUsage, common, env, rest, claimsCommands)
	case "routes":
		return dispatch(ctx, "routes", routesUsage, common, env, rest, routesCommands)
	case "reconcile":
		return (&reconcileCommand{common, env}).Run(ctx, rest)
	}
	return fmt.Errorf("unknown command %q: want migrate, claims, routes or reconcile, or no command to serve (see worker --help)", command)
}

// sessionCost is the random_page_cost the worker's sessions plan with
// (claim.PrepareWorkerSession), for its start line: the worker's own
// where the server leaves Postgres' default, else the operator's.
func sessionCost(ctx context.Context, pool *pgxpool.Pool) string {
	ctx, cancel := context.WithTimeout(ctx, dbCheckTimeout)
	defer cancel()
	var cost string
	if err := pool.QueryRow(ctx, `SELECT current_setting('random_page_cost')`).Scan(&cost); err != nil {
		return "unknown"
	}
	return cost
}

// serve wires config → a pool per served cell → each cell's delivery
// worker and River client → ops server, works jobs until ctx ends, then
// stops in reverse order: River first (soft, then hard), the ops server,
// the pools.
func serve(ctx context.Context, common cli.Common, cellsFlag string, env cli.Env) error {
	// The worker's sessions plan River's completions by primary key
	// (claim.PrepareWorkerSession).
	boot, err := cli.Boot(ctx, common, env, cli.AfterConnect(claim.PrepareWorkerSession))
	if err != nil {
		return err
	}
	defer boot.Close()
	cfg, logger := boot.Config, boot.Logger
	cfg.Worker.Listen = cmp.Or(common.Listen, cfg.Worker.Listen)
	pools, err := servedCells(boot.Cells, cellsFlag)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	routes := routeNames(cfg)
	tracing, err := telemetry.New(ctx, env.Getenv, "hookgate-worker")
	if err != nil {
		return err
	}
	defer tracing.Flush(ctx, logger)
	// Each cell's River client needs the reconciliation's worker first: the
	// reconciler reaches a provider's cell's store through cells once it is
	// set, before River starts.
	var cells *cell.Set
	reconciler, err := newReconciler(boot, env.Getenv, func(provider string) reconcile.Store {
		if c, ok := cells.ForProvider(provider); ok {
			return c.Store
		}
		return cells.First().Store
	}, reg)
	if err != nil {
		return err
	}
	parts := &cellParts{boot: boot, metrics: deliver.NewMetrics(reg, routes), reg: reg, tracing: tracing, reconciler: reconciler}
	defer parts.close() // after River has stopped, below
	if cells, err = cell.New(cfg, pools, parts.jobs, boot.Routes.MaxAttempts); err != nil {
		return err
	}
	for _, c := range cells.All() {
		cellRoutes := routes
		if len(cfg.Cells) > 0 {
			cellRoutes = cells.Routes(c.Name, routes)
		}
		stopPauseLog, err := parts.startCell(ctx, c, cellRoutes)
		if err != nil {
			return err
		}
		defer stopPauseLog()
	}

	// The console's and the API's reads go through a pool of their own
	// per cell (claim.ReadPool), closed after the ops server.
	var reads []*claim.ReadPool
	if cfg.Console.Enabled() {
		// Each cell's URL: DATABASE_URL without cells:.
		for _, c := range cells.All() {
			rp, err := cli.OpenReadPool(c.Pool.Config().ConnString(), cfg.Console.ReadPool)
			if err != nil {
				return err
			}
			defer rp.Close()
			reads = append(reads, rp)
		}
	}
	// The UI's background services live until the ops server is closed.
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopUI()
	o, err := newOps(uiCtx, boot, env, reg, cells, reads, consoleReconciler{r: reconciler, cells: cells})
	if err != nil {
		return err
	}
	return work(ctx, boot, o, cells, stopUI)
}

// stopRiver lets in-flight attempts finish for up to timeout, then cancels
// those still running. A cancelled attempt is recorded as interrupted and
// its job goes back to the queue without using up one of its attempts.
func stopRiver(ctx context.Context, client *river.Client[pgx.Tx], timeout time.Duration, logger *slog.Logger) {
	logger.Info("worker stopping: finishing in-flight deliveries", slog.Duration("shutdown_timeout", timeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := client.Stop(sctx)
	if err == nil {
		return
	}
	logger.Warn("deliveries still running after shutdown_timeout; cancelling them", slog.String("error", err.Error()))
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), opsGrace)
	defer ccancel()
	if err := client.StopAndCancel(cctx); err != nil {
		logger.Error("stopping the job client", slog.String("error", err.Error()))
	}
}

// consoleSecretFiles opens the console's password_file and token_file
// secrets by user or token name; a file that cannot be read, or holds fewer
// than config.MinConsoleSecret bytes, stops the start naming its key. Read
// again, a file is held to the same rule (else the last good secret stays,
// and the log names the key), and a new secret joins red (nil for none) at
// once.
func consoleSecretFiles(c config.Console, logger *slog.Logger, red *sanitize.Redactor) (map[string]*secretfile.File, error) {
	files := map[string]*secretfile.File{}
	res := secretfile.Resolver{Logger: logger}
	if red != nil {
		res.Redact = red.Add
	}
	open := func(key, name, path string) error {
		if path == "" {
			return nil
		}
		f, err := res.Open(path, key, config.CheckConsoleSecret)
		if err != nil {
			return err
		}
		files[name] = f
		return nil
	}
	for i, u := range c.Users {
		if err := open(fmt.Sprintf("console.users[%d].password_file", i), u.Name, u.PasswordFile); err != nil {
			return nil, err
		}
	}
	for i, t := range c.Tokens {
		if err := open(fmt.Sprintf("console.tokens[%d].token_file", i), t.Name, t.TokenFile); err != nil {
			return nil, err
		}
	}
	return files, nil
}
