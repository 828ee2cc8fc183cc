// Package reconcile fetches, from a provider's own API, the events the
// provider never delivered, and passes them through the same gate as a
// webhook: Stripe's events are claimed through the claim store's claim
// (gate.Request, as ingest builds it), GitHub's failed deliveries are
// redelivered by GitHub, signed, through ingest. It is a second door into
// the same gate, never a second gate: it and ingest import nothing of each
// other.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// Overlap is how far before the last run's newest event a run starts, so
// that an event created in the same second, or listed late by the
// provider, is not missed.
const Overlap = time.Minute

// Store is what a run needs of the claim store that holds a provider's
// events. *claim.Store is one.
type Store interface {
	Claim(ctx context.Context, ev claim.Event, routes []string, reopen bool) (claim.Result, error)
	ClaimedIDs(ctx context.Context, provider string, ids []string) (map[string]bool, error)
	StartReconcileRun(ctx context.Context, run claim.ReconcileRun) (claim.ReconcileRun, error)
	FinishReconcileRun(ctx context.Context, run claim.ReconcileRun) error
	ReconcileCursor(ctx context.Context, provider string) (*time.Time, error)
	LockReconcile(ctx context.Context, provider string, fn func(context.Context) error) error
}

// StoreOf returns the store a provider's events are claimed into: today
// one for all; with cells, the provider's cell's.
type StoreOf func(provider string) Store

// ErrNotConfigured is a run asked of a provider without a reconcile section.
var ErrNotConfigured = errors.New("the provider has no reconcile section")

// ErrUnauthorized marks a run the provider's API refused (401 or 403).
var ErrUnauthorized = errors.New("the provider's API refused the credentials")

// Run says what one run does.
type Run struct {
	Provider string
	// Trigger is claim.TriggerSchedule, TriggerCLI or TriggerAPI.
	Trigger string
	// Actor is who asked for it (the API's operator), else "".
	Actor string
	// DryRun lists and counts what the run would claim or redeliver, and
	// changes nothing; it does not move the next run's window.
	DryRun bool
	// Since, when positive, is how far back the run looks, instead of from
	// the last run's newest event.
	Since time.Duration
}

// window is the part of the provider's record a run lists.
type window struct {
	since  time.Time
	dryRun bool
}

// source is one provider's API, as a run uses it: it lists the window and
// claims or redelivers, counting in rec (Listed, Claimed, Redelivered,
// Skipped, Newest) as it goes, so that a run cut short records what it did.
type source interface {
	run(ctx context.Context, w window, st Store, rec *claim.ReconcileRun, count func(outcome string)) error
	// secret is the credential's value now, to keep out of errors.
	secret() string
}

// Options configure a Reconciler.
type Options struct {
	Config *config.Config
	// Routes is the route table the events are claimed against.
	Routes *route.Table
	// Stores gives the store of each provider.
	Stores StoreOf
	// Getenv reads the variables the reconcile sections name.
	Getenv func(string) string
	// Resolver opens the credentials: the same rules as every other secret
	// (its Redact hears each value).
	Resolver secretfile.Resolver
	// Redactor, when set, also hears the credentials read from the
	// environment.
	Redactor *sanitize.Redactor
	Metrics  *Metrics
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reconciler runs the reconciliation of every provider that has a
// reconcile section.
type Reconciler struct {
	cfg     *config.Config
	stores  StoreOf
	sources map[string]source
	metrics *Metrics
	logger  *slog.Logger
	now     func() time.Time
}

// New opens the credentials of every reconcile section and builds each
// provider's API client. A credential that is missing or empty stops the
// start, the error naming the key, never the value.
func New(o Options) (*Reconciler, error) {
	r := &Reconciler{cfg: o.Config, stores: o.Stores, sources: map[string]source{}, metrics: o.Metrics,
		logger: o.Logger, now: o.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for i, p := range o.Config.Providers {
		if p.Reconcile == nil {
			continue
		}
		key := fmt.Sprintf("providers[%d].reconcile", i)
		var src source
		var err error
		switch p.Scheme {
		case config.SchemeStripe:
			src, err = newStripe(key, p, o)
		case config.SchemeGitHub:
			src, err = newGitHub(key, p, o)
		default:
			err = fmt.Errorf("%s: applies only to scheme stripe or github, not %s", key, p.Scheme)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.sources[p.Name] = src
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.metrics.init(r.Providers())
	return r, nil
}

// Providers returns the names of the providers that reconcile, in order.
func (r *Reconciler) Providers() []string {
	var names []string
	for _, p := range r.cfg.Providers {
		if _, ok := r.sources[p.Name]; ok {
			names = append(names, p.Name)
		}
	}
	return names
}

// Configured reports whether provider has a reconcile section.
func (r *Reconciler) Configured(provider string) bool {
	_, ok := r.sources[provider]
	return ok
}

// Run runs one reconciliation of o.Provider, if no other run of it holds
// its lock (else claim.ErrReconcileRunning, and nothing is recorded). The
// run is recorded as it starts and as it ends; a run the provider's API
// failed is returned with its error, which names the provider and never
// the credential, and is recorded on the run.
func (r *Reconciler) Run(ctx context.Context, o Run) (claim.ReconcileRun, error) {
	src, ok := r.sources[o.Provider]
	if !ok {
		return claim.ReconcileRun{}, fmt.Errorf("reconciling %s: %w", o.Provider, ErrNotConfigured)
	}
	st := r.stores(o.Provider)
	var rec claim.ReconcileRun
	var runErr error
	err := st.LockReconcile(ctx, o.Provider, func(ctx context.Context) error {
		var err error
		rec, runErr, err = r.run(ctx, st, src, o)
		return err
	})
	if err != nil {
		return rec, err
	}
	return rec, runErr
}

// run does Run's work under the lock. err is a failure to record the run;
// runErr the run's own.
func (r *Reconciler) run(ctx context.Context, st Store, src source, o Run) (rec claim.ReconcileRun, runErr, err error) {
	p := r.provider(o.Provider)
	now := r.now()
	cursor, err := st.ReconcileCursor(ctx, o.Provider)
	if err != nil {
		return rec, nil, err
	}
	since := now.Add(-p.Reconcile.Lookback.D())
	switch {
	case o.Since > 0:
		since = now.Add(-o.Since)
	case cursor != nil:
		// Never before the oldest event the provider keeps.
		since = cursor.Add(-Overlap)
		if oldest := now.Add(-config.MaxReconcileLookback); since.Before(oldest) {
			since = oldest
		}
	}
	rec, err = st.StartReconcileRun(ctx, claim.ReconcileRun{Provider: o.Provider, Trigger: o.Trigger, Actor: o.Actor,
		DryRun: o.DryRun, Since: since.UTC().Truncate(time.Second)})
	if err != nil {
		return rec, nil, err
	}
	count := func(outcome string) {
		if !o.DryRun {
			r.metrics.event(o.Provider, outcome)
		}
	}
	runErr = src.run(ctx, window{since: since, dryRun: o.DryRun}, st, &rec, count)
	if rec.Newest == nil && !o.DryRun {
		rec.Newest = cursor // nothing listed: the window stays where it was
	}
	if runErr != nil {
		rec.Error = sanitize.Cut(fmt.Sprintf("reconciling %s: %s", o.Provider, scrub(runErr.Error(), src.secret())), maxRunError)
		runErr = &RunError{msg: rec.Error, unauthorized: errors.Is(runErr, ErrUnauthorized)}
	}
	// Recorded even when ctx ended: what the run did is kept.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := st.FinishReconcileRun(fctx, rec); err != nil {
		return rec, runErr, err
	}
	rec.FinishedAt = new(time.Time)
	*rec.FinishedAt = r.now()
	if !o.DryRun {
		r.metrics.run(o.Provider, runErr)
	}
	r.log(ctx, rec, runErr)
	return rec, runErr, nil
}

// maxRunError bounds the error recorded on a run.
const maxRunError = 1024

// RunError is a failed run's error as it is recorded: it names the
// provider and never the credential. errors.Is(err, ErrUnauthorized) holds
// when the provider's API refused the credentials.
type RunError struct {
	msg          string
	unauthorized bool
}

func (e *RunError) Error() string { return e.msg }

// Unwrap returns ErrUnauthorized for a refused run, else nil.
func (e *RunError) Unwrap() error {
	if e.unauthorized {
		return ErrUnauthorized
	}
	return nil
}

// log writes one line per run.
func (r *Reconciler) log(ctx context.Context, rec claim.ReconcileRun, runErr error) {
	attrs := []slog.Attr{slog.String("provider", rec.Provider), slog.Int64("run", rec.ID), slog.String("trigger", rec.Trigger),
		slog.Bool("dry_run", rec.DryRun), slog.Time("since", rec.Since), slog.Int("listed", rec.Listed),
		slog.Int("claimed", rec.Claimed), slog.Int("redelivered", rec.Redelivered), slog.Int("skipped", rec.Skipped)}
	switch {
	case runErr != nil:
		r.logger.LogAttrs(ctx, slog.LevelError, "reconciliation failed; the next run is tried as scheduled",
			append(attrs, slog.String("error", rec.Error))...)
	case rec.Claimed+rec.Redelivered > 0 && !rec.DryRun:
		r.logger.LogAttrs(ctx, slog.LevelWarn, "reconciliation found events the provider never delivered", attrs...)
	default:
		r.logger.LogAttrs(ctx, slog.LevelInfo, "reconciled", attrs...)
	}
}

func (r *Reconciler) provider(name string) config.Provider {
	i := slices.IndexFunc(r.cfg.Providers, func(p config.Provider) bool { return p.Name == name })
	return r.cfg.Providers[i]
}

// scrub removes the credential from s, should a provider or a library
// have quoted it.
func scrub(s, secret string) string {
	if len(secret) >= 4 {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// newest sets rec.Newest to t when it is newer.
func newest(rec *claim.ReconcileRun, t time.Time) {
	t = t.UTC()
	if rec.Newest == nil || t.After(*rec.Newest) {
		rec.Newest = &t
	}
}
