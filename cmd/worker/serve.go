package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/deliver"
	"github.com/hookgate/hookgate/internal/lockout"
	"github.com/hookgate/hookgate/internal/maintenance"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// The serving worker's parts, in the order serve wires them: the River
// client that works the jobs, the ops server's handlers, and the loop that
// serves until the worker stops.

// newJobClient returns the River client that works cell c's delivery,
// reconcile and retention jobs for boot's configuration: the cell's leader
// runs its jobs' reconciler, retention and its providers' reconciliation,
// over the cell's pool.
func newJobClient(boot *cli.Server, c cell.Pool, delivery *deliver.Worker, reconciler *reconcile.Reconciler, reg prometheus.Registerer, logger *slog.Logger, tracing *telemetry.Tracing) (*river.Client[pgx.Tx], error) {
	cfg, pool := boot.Config, c.Pool
	jobsReconciler := maintenance.NewReconciler(pool, boot.Routes.MaxAttempts, cfg.Worker.ReconcileInterval.D(),
		min(time.Minute, cfg.Worker.RescueAfter.D()), logger)
	// A retention run stops well before River could take it for stuck;
	// the next run goes on where it stopped.
	retained := claim.NewStore(pool, nil, nil)
	retainer := maintenance.NewRetainer(retained, cfg.Retention,
		min(cfg.Retention.Interval.D(), cfg.Worker.RescueAfter.D()*3/4), maintenance.NewRetentionMetrics(reg), logger).
		WithAudit(func(ctx context.Context) (int, error) {
			return retained.PruneAudit(ctx, cfg.Retention.AuditAge(), cfg.Retention.BatchSize)
		})
	jobRetention := maintenance.RiverJobRetention(cfg.Retention, cfg.Worker.ReconcileInterval.D())
	workers := river.NewWorkers()
	river.AddWorker(workers, delivery)
	river.AddWorker(workers, jobsReconciler)
	river.AddWorker(workers, retainer)
	// A run stops well before River could take it for stuck.
	river.AddWorker(workers, reconcile.NewWorker(reconciler, min(10*time.Minute, cfg.Worker.RescueAfter.D()*3/4)))
	return claim.NewWorkClient(pool, &river.Config{
		Logger:               logger,
		Workers:              workers,
		Queues:               cellQueues(cfg, c.Name),
		JobTimeout:           deliver.JobTimeout(cfg),
		RescueStuckJobsAfter: cfg.Worker.RescueAfter.D(),
		FetchCooldown:        fetchCooldown,
		FetchPollInterval:    fetchPollInterval,
		PeriodicJobs: append([]*river.PeriodicJob{jobsReconciler.PeriodicJob(), retainer.PeriodicJob()},
			reconciler.PeriodicJobsFor(func(provider string) bool { return cfg.ProviderCell(provider) == c.Name })...),
		Middleware: tracing.RiverMiddleware(),

		CompletedJobRetentionPeriod: jobRetention.Completed,
		CancelledJobRetentionPeriod: jobRetention.Cancelled,
		DiscardedJobRetentionPeriod: jobRetention.Discarded,
	})
}

// newOps returns the ops server's handlers: metrics and health, the River
// UI when HOOKGATE_UI_PASSWORD is set (its background services live until
// uiCtx ends), and the console when the configuration enables it, reading
// every cell through its read pool (reads, in cells' order) and acting in
// each cell through its store; the River UI shows the first cell the
// worker serves.
func newOps(uiCtx context.Context, boot *cli.Server, env cli.Env, reg *prometheus.Registry, cells *cell.Set, reads []*claim.ReadPool,
	reconciler console.Reconciler) (*ops, error) {
	cfg, logger := boot.Config, boot.Logger
	first := cells.First()
	store, client, pool := first.Store, first.Jobs, first.Pool
	var ready anyCell
	for _, c := range cells.All() {
		ready = append(ready, cli.Writable{Pool: c.Pool})
	}
	o := &ops{db: ready, reg: reg, logger: logger, guard: lockout.NewGuard(cfg.Worker.Proxies()), audit: store}
	if password := env.Getenv("HOOKGATE_UI_PASSWORD"); password != "" {
		ui, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(client, nil),
			Logger:    logger,
			Prefix:    uiPrefix,
		})
		if err != nil {
			return nil, fmt.Errorf("creating the River UI: %w", err)
		}
		if err := ui.Start(uiCtx); err != nil {
			return nil, fmt.Errorf("starting the River UI: %w", err)
		}
		o.ui, o.uiPassword = ui, password
	} else {
		logger.Info("River UI disabled; set HOOKGATE_UI_PASSWORD to serve it at " + uiPrefix + "/ behind basic auth (user " + uiUser + ")")
	}

	if cfg.Console.Enabled() {
		consoleSecrets, err := cfg.ResolveConsoleSecrets(env.Getenv)
		if err != nil {
			return nil, err
		}
		files, err := consoleSecretFiles(cfg.Console, logger, boot.Redactor)
		if err != nil {
			return nil, err
		}
		var consoleCells []console.Cell
		for i, c := range cells.All() {
			consoleCells = append(consoleCells, console.Cell{Name: c.Name, Store: c.Store, Reads: reads[i], Queues: c.Jobs})
		}
		srv := console.New(console.Options{
			Config: cfg, Secrets: consoleSecrets, SecretFiles: files, Store: store, Reads: reads[0], Queues: client, DB: pool, Logger: logger,
			Guard: o.guard, Reconciler: reconciler, Cells: consoleCells,
		})
		// A password changed since a worker last recorded it (a new
		// password_env across a restart) ends its user's sessions before
		// the console serves; a changed password_file, at once, not at
		// their next use, until uiCtx ends, with the River UI's.
		srv.CheckPasswords(uiCtx)
		go srv.WatchSecrets(uiCtx)
		o.console = srv.Handler()
	}
	return o, nil
}

// work serves the ops endpoints and works every cell's jobs until ctx
// ends or the ops server fails, then stops River (see stopRiver, every
// cell's client at once), the River UI (stopUI) and the ops server, in
// that order.
func work(ctx context.Context, boot *cli.Server, o *ops, cells *cell.Set, stopUI func()) error {
	cfg, logger := boot.Config, boot.Logger
	ln, err := net.Listen("tcp", cfg.Worker.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Worker.Listen, err)
	}
	hs := &http.Server{
		Handler:           o.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	// River stops when told to below, not when ctx ends, so that in-flight
	// attempts get worker.shutdown_timeout to finish.
	starter := newCellStarter(logger)
	if err := starter.start(context.WithoutCancel(ctx), cells); err != nil {
		_ = hs.Close()
		return err
	}
	first := cells.First()
	logger.Info("worker running", slog.String("ops_addr", ln.Addr().String()),
		slog.Int("concurrency", cfg.Worker.Concurrency), slog.Int("routes", len(cfg.Routes)),
		slog.Int("cells", len(cells.All())), slog.String("random_page_cost", sessionCost(ctx, first.Pool)))
	for _, c := range cells.All() {
		logPausedRoutes(ctx, c.Store, c.Jobs, cfg, logger)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		serveErr = fmt.Errorf("serving ops endpoints: %w", err)
		logger.Error("ops server stopped; stopping the worker", slog.String("error", err.Error()))
	}

	starter.stop(ctx, cfg.Worker.ShutdownTimeout.D())
	stopUI()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if serveErr == nil {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("serving ops endpoints: %w", err)
		}
	}
	logger.Info("worker stopped")
	return serveErr
}
