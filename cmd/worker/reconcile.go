package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/secretfile"
)

const reconcileUsage = `worker reconcile [--provider P] [--since 24h] [--dry-run] [--json]
       worker reconcile --runs [--provider P] [--limit N] [--json]`

// newReconciler builds the reconciliation of boot's providers, claiming
// into the store storeOf gives (one for all today; a provider's cell's
// later). reg may be nil.
func newReconciler(boot *cli.Server, getenv func(string) string, storeOf reconcile.StoreOf, reg prometheus.Registerer) (*reconcile.Reconciler, error) {
	var metrics *reconcile.Metrics
	if reg != nil {
		metrics = reconcile.NewMetrics(reg)
	}
	return reconcile.New(reconcile.Options{
		Config: boot.Config, Routes: boot.Routes, Stores: storeOf, Getenv: getenv,
		Resolver: secretfile.Resolver{Logger: boot.Logger, Redact: boot.Redactor.Add}, Redactor: boot.Redactor,
		Metrics: metrics, Logger: boot.Logger,
	})
}

// consoleReconciler is the console's view of the reconciliation: each
// run is recorded in its provider's cell.
type consoleReconciler struct {
	r     *reconcile.Reconciler
	cells *cell.Set
}

func (c consoleReconciler) Configured(provider string) bool { return c.r.Configured(provider) }

func (c consoleReconciler) Reconcile(ctx context.Context, provider, actor string, since time.Duration, dryRun bool) (claim.ReconcileRun, error) {
	return c.r.Run(ctx, reconcile.Run{Provider: provider, Trigger: claim.TriggerAPI, Actor: actor, Since: since, DryRun: dryRun})
}

// Runs reads provider's runs in its cell, or every cell's, merged newest
// first; with several cells, one that cannot be read is left out.
func (c consoleReconciler) Runs(ctx context.Context, provider string, limit int) ([]claim.ReconcileRun, error) {
	if provider != "" {
		if pc, ok := c.cells.ForProvider(provider); ok {
			return pc.Store.ReconcileRuns(ctx, provider, limit)
		}
	}
	all := c.cells.All()
	runs := make([][]claim.ReconcileRun, len(all))
	errs := cell.Each(len(all), func(i int) (err error) {
		runs[i], err = all[i].Store.ReconcileRuns(ctx, provider, limit)
		return err
	})
	if len(all) == 1 {
		return runs[0], errs[0]
	}
	merged := slices.Concat(runs...)
	slices.SortStableFunc(merged, func(a, b claim.ReconcileRun) int { return b.StartedAt.Compare(a.StartedAt) })
	if limit > 0 && len(merged) > limit {
		merged = merged[:limit]
	}
	return merged, nil
}

// reconcileCommand is `worker reconcile`: one run of each provider that
// reconciles (or of --provider) now, or with --runs the newest runs.
type reconcileCommand struct {
	common cli.Common
	env    cli.Env
}

// Run implements runner.
func (c *reconcileCommand) Run(ctx context.Context, args []string) error {
	common, env := c.common, c.env
	var (
		provider string
		since    time.Duration
		dryRun   bool
		runs     bool
		limit    int
		asJSON   bool
	)
	fs := cli.NewFlagSet("worker reconcile", reconcileUsage, env, &common)
	fs.StringVar(&provider, "provider", "", "only this provider")
	fs.DurationVar(&since, "since", 0, "look back this far (e.g. 24h) instead of from the last run")
	fs.BoolVar(&dryRun, "dry-run", false, "list and count what would be claimed or redelivered, changing nothing")
	fs.BoolVar(&runs, "runs", false, "list the newest runs instead of running")
	fs.IntVar(&limit, "limit", 20, "with --runs, how many")
	fs.BoolVar(&asJSON, "json", false, "JSON instead of text")
	rest, err := parse(fs, args)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], reconcileUsage)
	case since < 0 || since > 30*24*time.Hour:
		return fmt.Errorf("--since %s: want a positive duration of at most 720h (usage: %s)", since, reconcileUsage)
	case runs && (dryRun || since != 0):
		return fmt.Errorf("--runs lists runs; --dry-run and --since apply to a run (usage: %s)", reconcileUsage)
	}
	if runs {
		return listRuns(ctx, common, env, provider, limit, asJSON)
	}
	return runReconcile(ctx, common, env, reconcile.Run{Provider: provider, Trigger: claim.TriggerCLI, Since: since, DryRun: dryRun}, asJSON)
}

// runReconcile runs o, for every provider that reconciles when
// o.Provider is "", and prints each run; a run that failed fails the command.
func runReconcile(ctx context.Context, common cli.Common, env cli.Env, o reconcile.Run, asJSON bool) error {
	boot, err := cli.Boot(ctx, common, env)
	if err != nil {
		return err
	}
	defer boot.Close()
	// Each provider's events are claimed in its cell.
	cells, err := cell.New(boot.Config, boot.Cells, func(p cell.Pool) (*river.Client[pgx.Tx], error) {
		return claim.NewInsertClient(p.Pool, nil, 0)
	}, boot.Routes.MaxAttempts)
	if err != nil {
		return err
	}
	r, err := newReconciler(boot, env.Getenv, func(provider string) reconcile.Store {
		if c, ok := cells.ForProvider(provider); ok {
			return c.Store
		}
		return cells.First().Store
	}, nil)
	if err != nil {
		return err
	}
	providers := r.Providers()
	if o.Provider != "" {
		if !r.Configured(o.Provider) {
			return fmt.Errorf("--provider %s: no provider with a reconcile section has that name (these have one: %v)", o.Provider, providers)
		}
		providers = []string{o.Provider}
	}
	if len(providers) == 0 {
		return errors.New("no provider has a reconcile section")
	}
	var failed []error
	var done []claim.ReconcileRun
	for _, p := range providers {
		o.Provider = p
		run, err := r.Run(ctx, o)
		if err != nil {
			failed = append(failed, err)
			if run.ID == 0 {
				continue
			}
		}
		done = append(done, run)
	}
	if err := printRuns(env.Stdout, done, asJSON); err != nil {
		return err
	}
	return errors.Join(failed...)
}

// listRuns prints the newest runs.
func listRuns(ctx context.Context, common cli.Common, env cli.Env, provider string, limit int, asJSON bool) error {
	if limit < 1 || limit > 500 {
		return fmt.Errorf("--limit %d: want 1 to 500", limit)
	}
	_, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()
	runs, err := store.ReconcileRuns(ctx, provider, limit)
	if err != nil {
		return err
	}
	return printRuns(env.Stdout, runs, asJSON)
}

// printRuns prints runs as a table, or one JSON object per line.
func printRuns(w io.Writer, runs []claim.ReconcileRun, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range runs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPROVIDER\tTRIGGER\tSTARTED\tSINCE\tLISTED\tCLAIMED\tREDELIVERED\tSKIPPED\tERROR")
	for _, r := range runs {
		trigger := r.Trigger
		if r.DryRun {
			trigger += " (dry run)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.Provider, trigger, stamp(&r.StartedAt),
			stamp(&r.Since), r.Listed, r.Claimed, r.Redelivered, r.Skipped, orDash(r.Error))
	}
	return tw.Flush()
}
