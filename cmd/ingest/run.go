package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/telemetry"
)

const usage = `ingest [--config FILE] [--listen ADDR]
       ingest migrate [--config FILE]`

// insertNotifyCooldown is the River client's FetchCooldown. Ingest never
// fetches, but River also uses it to rate-limit the NOTIFY that wakes
// workers after a job insert, per inserting client: at River's 100 ms
// default, most events at a light load wait for a worker's next poll
// instead. 1 ms is River's minimum; under load the wake-ups stay at most
// a thousand a second per process.
const insertNotifyCooldown = time.Millisecond

// shutdownGrace bounds how long in-flight requests may take to finish after
// SIGTERM before the server closes their connections.
const shutdownGrace = 30 * time.Second

// run wires config → a pool per cell → each cell's insert-only River
// client, claim store and group commit → HTTP server, serves until ctx ends, then drains in reverse order.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	env := cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr}
	var common cli.Common
	fs := cli.NewFlagSet("ingest", usage, env, &common)
	fs.StringVar(&common.Listen, "listen", "", "listen address (overrides ingest.listen)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0 && fs.Arg(0) == "migrate" && common.Listen != "":
		return fmt.Errorf("--listen applies only when serving, not to migrate (usage: %s)", usage)
	case fs.NArg() > 0 && fs.Arg(0) == "migrate":
		return cli.Migrate(ctx, "ingest", common, fs.Args()[1:], env)
	case fs.NArg() > 0:
		return fmt.Errorf("unknown command %q (usage: %s)", fs.Arg(0), usage)
	}
	boot, err := cli.Boot(ctx, common, env)
	if err != nil {
		return err
	}
	defer boot.Close()
	cfg, secrets, logger := boot.Config, boot.Secrets, boot.Logger
	cfg.Ingest.Listen = cmp.Or(common.Listen, cfg.Ingest.Listen)

	// A pool, an insert-only River client (never started, no workers, so
	// ingest links no worker code) and a store per cell.
	cells, err := cell.New(cfg, boot.Cells, func(p cell.Pool) (*river.Client[pgx.Tx], error) {
		return claim.NewInsertClient(p.Pool, logger, insertNotifyCooldown)
	}, boot.Routes.MaxAttempts)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	claims, ready := claimGroups(cfg, cells, reg)
	srv, err := ingest.New(cfg, boot.Routes, secrets, claims, ready[0].DB, logger, reg)
	if err != nil {
		return err
	}
	if len(cfg.Cells) > 0 {
		srv.WithCells(ready)
	}
	srv.WithRedactor(boot.Redactor)
	tracing, err := telemetry.New(ctx, env.Getenv, "hookgate-ingest")
	if err != nil {
		return err
	}
	defer tracing.Flush(ctx, logger)
	srv.WithTracing(tracing)

	ln, err := net.Listen("tcp", cfg.Ingest.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Ingest.Listen, err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("ingest listening", slog.String("addr", ln.Addr().String()), slog.Int("providers", len(cfg.Providers)),
		slog.Int("routes", len(cfg.Routes)), slog.Int("cells", len(cells.All())))

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("ingest shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	logger.Info("ingest stopped")
	return nil
}

// claimGroups returns the claimer of every provider, a group commit per
// cell (each batch is one transaction in one cell), and each cell's
// readiness check, in configuration order.
func claimGroups(cfg *config.Config, cells *cell.Set, reg *prometheus.Registry) (ingest.ByProvider, []ingest.CellPinger) {
	batchSize := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "hookgate", Name: "ingest_claim_batch_size",
		Help:    "Events claimed per shared claim transaction (group commit).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
	byCell := map[string]*ingest.Group{}
	var ready []ingest.CellPinger
	for _, c := range cells.All() {
		byCell[c.Name] = ingest.NewGroup(c.Store, ingest.GroupOptions{Timeout: cfg.Ingest.ClaimTimeout.D(),
			Observe: func(n int) { batchSize.Observe(float64(n)) }})
		ready = append(ready, ingest.CellPinger{Name: c.Name, DB: cli.Writable{Pool: c.Pool}})
	}
	claims := ingest.ByProvider{}
	for _, p := range cfg.Providers {
		claims[p.Name] = byCell[cfg.ProviderCell(p.Name)]
	}
	reg.MustRegister(batchSize, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "hookgate", Name: "ingest_claims_waiting",
		Help: "Verified events waiting for a claim transaction to take them.",
	}, func() float64 {
		n := 0
		for _, g := range byCell {
			n += g.Waiting()
		}
		return float64(n)
	}))
	return claims, ready
}
