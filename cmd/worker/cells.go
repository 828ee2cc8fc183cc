package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/deliver"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// The serving worker over its cells: one River client per cell, each with
// its own delivery worker, reconciler and retention under that cell's
// leader, and the cell's gauges.

// servedCells returns the cells of pools that --cells names (a comma
// separated list), or all of them when it names none, in configuration
// order. A name that is no cell is an error.
func servedCells(pools []cli.CellPool, flag string) ([]cli.CellPool, error) {
	if flag == "" {
		return pools, nil
	}
	want := strings.Split(flag, ",")
	for i := range want {
		want[i] = strings.TrimSpace(want[i])
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			return nil, fmt.Errorf("--cells: %q is not a cell of the configuration (cells: %s)", w, strings.Join(names, ", "))
		}
	}
	var out []cli.CellPool
	for _, p := range pools {
		if slices.Contains(want, p.Name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// cellParts are what the worker builds for each cell besides its River
// client.
type cellParts struct {
	boot    *cli.Server
	metrics *deliver.Metrics
	reg     *prometheus.Registry
	tracing *telemetry.Tracing
	// reconciler runs the providers' reconciliation, in each cell's client.
	reconciler *reconcile.Reconciler
	delivery   []*deliver.Worker
}

// labelled is reg, adding cell="name" to every metric registered through
// it when the configuration lists cells; without cells:, the one cell's
// metrics keep the names and labels they always had.
func (p *cellParts) labelled(name string) prometheus.Registerer {
	if len(p.boot.Config.Cells) == 0 {
		return p.reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"cell": name}, p.reg)
}

// logger is the worker's logger, naming the cell when there are several.
func (p *cellParts) logger(name string) *slog.Logger {
	if len(p.boot.Config.Cells) == 0 {
		return p.boot.Logger
	}
	return p.boot.Logger.With(slog.String("cell", name))
}

// jobs returns cell p's River client that works its jobs, with a delivery
// worker of its own over the cell's pool.
func (p *cellParts) jobs(c cell.Pool) (*river.Client[pgx.Tx], error) {
	delivery, err := deliver.NewWorker(deliver.Options{
		Config:         p.boot.Config,
		SigningSecrets: p.boot.Secrets.Route,
		SecretHeaders:  p.boot.Secrets.Headers,
		Routes:         p.boot.Routes,
		Redactor:       p.boot.Redactor,
		DB:             c.Pool,
		Logger:         p.logger(c.Name),
		Metrics:        p.metrics,
		Tracing:        p.tracing,
	})
	if err != nil {
		return nil, err
	}
	p.delivery = append(p.delivery, delivery)
	return newJobClient(p.boot, c, delivery, p.reconciler, p.labelled(c.Name), p.logger(c.Name), p.tracing)
}

// close stops the delivery workers' call goroutines, once River has
// stopped.
func (p *cellParts) close() {
	for _, d := range p.delivery {
		d.Close()
	}
}

// cellQueues is deliver.Queues for the routes cell holds, and the default
// queue; every route's queue without cells:.
func cellQueues(cfg *config.Config, cell string) map[string]river.QueueConfig {
	queues := deliver.Queues(cfg)
	if len(cfg.Cells) == 0 {
		return queues
	}
	for _, r := range cfg.Routes {
		if cfg.RouteCell(r.Name) != cell {
			delete(queues, claim.Queue(r.Name))
		}
	}
	return queues
}

// startCell readies cell c before its River client starts: waiting jobs
// moved to their routes' queues, pauses logged, and the cell's gauges
// registered. A cell that cannot be reached is logged when there are
// several (it fails alone); with one, the worker stops, as it always has.
func (p *cellParts) startCell(ctx context.Context, c *cell.Cell, routes []string) (stopPauseLog func(), err error) {
	cfg, logger := p.boot.Config, p.logger(c.Name)
	stopPauseLog = logPauses(c.Jobs, cfg, logger)
	if err := moveToRouteQueues(ctx, c.Store, cfg, logger); err != nil {
		if len(cfg.Cells) < 2 {
			stopPauseLog()
			return nil, err
		}
		logger.Warn("cell unreachable at start; its deliveries wait until it answers", slog.String("error", err.Error()))
	}
	reg := p.labelled(c.Name)
	reg.MustRegister(deliver.NewBacklogCollector(c.Store.Backlog, routes, dbCheckTimeout, logger),
		deliver.NewBreakerCollector(c.Store.Breakers, routes, dbCheckTimeout, logger),
		deliver.NewHeldCollector(c.Store.RouteHeld, routes, dbCheckTimeout, logger),
		deliver.NewQueueCollector(claim.OldestDueDelivery(c.Jobs), dbCheckTimeout, logger))
	return stopPauseLog, nil
}

// anyCell is the worker's /readyz over its cells: ready while one of them
// is reachable and accepts writes.
type anyCell []cli.Writable

func (a anyCell) Ping(ctx context.Context) error {
	var errs []error
	for _, w := range a {
		err := w.Ping(ctx)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startRetry is how often a cell whose River client could not start (its
// database down as the worker started) is tried again.
const startRetry = time.Second

// cellStarter starts each cell's River client. With several cells, one
// that cannot start is logged and tried again every startRetry, in the
// background, until it starts or the worker stops, while the others work:
// a cell fails alone. With one, its error stops the worker, as it always
// has.
type cellStarter struct {
	logger   *slog.Logger
	mu       sync.Mutex
	started  []*cell.Cell
	stopping chan struct{}
	retries  sync.WaitGroup
}

func newCellStarter(logger *slog.Logger) *cellStarter {
	return &cellStarter{logger: logger, stopping: make(chan struct{})}
}

// start starts every cell of cells, on a context River's own stop ends.
func (s *cellStarter) start(ctx context.Context, cells *cell.Set) error {
	for _, c := range cells.All() {
		err := c.Jobs.Start(ctx)
		if err == nil {
			s.add(c)
			continue
		}
		if len(cells.All()) == 1 {
			return fmt.Errorf("starting job client: %w", err)
		}
		s.logger.Warn("cell unreachable: its job client starts once it answers", slog.String("cell", c.Name), slog.String("error", err.Error()))
		s.retries.Go(func() { s.retry(ctx, c) })
	}
	return nil
}

func (s *cellStarter) add(c *cell.Cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, c)
}

// retry starts c's client once its database answers.
func (s *cellStarter) retry(ctx context.Context, c *cell.Cell) {
	for {
		select {
		case <-s.stopping:
			return
		case <-time.After(startRetry):
		}
		if err := c.Jobs.Start(ctx); err == nil {
			s.add(c)
			s.logger.Info("cell reachable: its job client started", slog.String("cell", c.Name))
			return
		}
	}
}

// stop ends the retries, then stops every started client at once (see
// stopRiver).
func (s *cellStarter) stop(ctx context.Context, timeout time.Duration) {
	close(s.stopping)
	s.retries.Wait()
	var wg sync.WaitGroup
	for _, c := range s.started {
		wg.Go(func() { stopRiver(ctx, c.Jobs, timeout, s.logger) })
	}
	wg.Wait()
}

// routeStates reads every configured route's state, in file order, each
// from its own cell.
func routeStates(ctx context.Context, cfg *config.Config, env cli.Env) ([]claim.RouteState, error) {
	byRoute := map[string]claim.RouteState{}
	for _, c := range cfg.CellList() {
		var routes []string
		for _, r := range cfg.Routes {
			if cfg.RouteCell(r.Name) == c.Name {
				routes = append(routes, r.Name)
			}
		}
		if len(routes) == 0 {
			continue
		}
		states, err := cellRouteStates(ctx, cfg, c.Name, routes, env)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			byRoute[st.Route] = st
		}
	}
	out := make([]claim.RouteState, len(cfg.Routes))
	for i, r := range cfg.Routes {
		out[i] = byRoute[r.Name]
	}
	return out, nil
}

// cellRouteStates reads the states of routes, all of cell name.
func cellRouteStates(ctx context.Context, cfg *config.Config, name string, routes []string, env cli.Env) ([]claim.RouteState, error) {
	pool, err := cli.OpenCell(ctx, cfg, name, env)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	client, err := claim.NewInsertClient(pool, nil, 0)
	if err != nil {
		return nil, err
	}
	states, err := claim.NewStore(pool, client, cfg.MaxAttempts).RouteStates(ctx, client, routes)
	if err != nil && len(cfg.Cells) > 0 {
		return nil, fmt.Errorf("cell %s: %w", name, err)
	}
	return states, err
}
