// Package maintenance holds the worker's background upkeep of the claim
// tables: periodic River jobs that keep them to the size the config allows.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// RetentionKind is the River job kind of RetentionArgs.
const RetentionKind = "hookgate.retention"

// RetentionArgs is the periodic job that applies retention (see
// claim.Store.Prune).
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return RetentionKind }

// Pruner is the store operation a Retainer runs.
type Pruner interface {
	Prune(ctx context.Context, r claim.Retention) (claim.PruneResult, error)
}

// Retainer is the worker of RetentionArgs.
type Retainer struct {
	schedule[RetentionArgs]

	store   Pruner
	policy  claim.Retention
	metrics *RetentionMetrics
	logger  *slog.Logger
	// audit, when set, deletes the audit rows retention.audit lets go.
	audit func(context.Context) (int, error)
}

// WithAudit makes every run also call prune, which deletes the audit rows
// past retention.audit and returns how many.
func (r *Retainer) WithAudit(prune func(context.Context) (int, error)) *Retainer {
	r.audit = prune
	return r
}

// NewRetainer returns the retention worker for cfg's retention section.
// timeout bounds one run and must not exceed worker.rescue_after; a run cut
// short by it keeps what it did, and the next run goes on from there.
// metrics may be nil.
func NewRetainer(store Pruner, r config.Retention, timeout time.Duration, metrics *RetentionMetrics, logger *slog.Logger) *Retainer {
	return &Retainer{
		schedule: schedule[RetentionArgs]{kind: RetentionKind, interval: r.Interval.D(), timeout: timeout},
		store:    store,
		policy:   Policy(r),
		metrics:  metrics,
		logger:   logger,
	}
}

// Policy is the claim.Retention that the config's retention section means.
func Policy(r config.Retention) claim.Retention {
	return claim.Retention{Claims: r.Claims.D(), Payloads: r.Payloads.D(), BatchSize: r.BatchSize}
}

// Work implements river.Worker: one Prune, counted in the metrics and
// logged in one line with what it did.
func (r *Retainer) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	start := time.Now()
	res, err := r.store.Prune(ctx, r.policy)
	r.metrics.add(res)
	attrs := []slog.Attr{slog.Int("deleted", res.Deleted), slog.Int("payloads_cleared", res.PayloadsCleared),
		slog.Int("reconcile_runs_deleted", res.RunsDeleted)}
	if r.audit != nil && err == nil {
		var audited int
		audited, err = r.audit(ctx)
		attrs = append(attrs, slog.Int("audit_deleted", audited))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(start)))
	switch {
	case err != nil && ctx.Err() != nil:
		r.logger.LogAttrs(ctx, slog.LevelWarn, "applied retention in part; the next run goes on", attrs...)
		return nil
	case err != nil:
		r.logger.LogAttrs(ctx, slog.LevelError, "applying retention failed", append(attrs, slog.String("error", err.Error()))...)
		return err
	}
	r.logger.LogAttrs(ctx, slog.LevelInfo, "applied retention", attrs...)
	return nil
}

// RetentionMetrics count what retention removed. A nil *RetentionMetrics
// counts nothing.
type RetentionMetrics struct {
	deleted prometheus.Counter
	cleared prometheus.Counter
}

// NewRetentionMetrics registers hookgate_retention_deleted_total and
// hookgate_retention_payloads_cleared_total with reg.
func NewRetentionMetrics(reg prometheus.Registerer) *RetentionMetrics {
	m := &RetentionMetrics{
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "retention_deleted_total",
			Help: "Terminal claims deleted by retention, with their deliveries.",
		}),
		cleared: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "retention_payloads_cleared_total",
			Help: "Raw payloads of terminal claims cleared by retention.",
		}),
	}
	reg.MustRegister(m.deleted, m.cleared)
	return m
}

func (m *RetentionMetrics) add(res claim.PruneResult) {
	if m != nil {
		m.deleted.Add(float64(res.Deleted))
		m.cleared.Add(float64(res.PayloadsCleared))
	}
}

// River's defaults for keeping finalized job rows.
const (
	riverCompletedRetention = 24 * time.Hour
	riverDiscardedRetention = 7 * 24 * time.Hour
)

// JobRetention is how long River keeps finalized job rows (River's
// CompletedJobRetentionPeriod, CancelledJobRetentionPeriod and
// DiscardedJobRetentionPeriod).
type JobRetention struct {
	Completed, Cancelled, Discarded time.Duration
}

// RiverJobRetention keeps River's job rows consistent with the claims they
// deliver. The delivery table, not River, is the record of outcomes, so a
// job row never needs to outlive its claim: River's defaults (completed and
// cancelled 24h, discarded 7 days) are shortened to retention.claims when
// that is shorter. Cancelled and discarded rows are what the reconciler
// reads to explain why a delivery has no live job, so they are kept at
// least two reconcile intervals.
func RiverJobRetention(r config.Retention, reconcileInterval time.Duration) JobRetention {
	claims := r.Claims.D()
	explain := 2 * reconcileInterval
	return JobRetention{
		Completed: min(riverCompletedRetention, claims),
		Cancelled: max(min(riverCompletedRetention, claims), explain),
		Discarded: max(min(riverDiscardedRetention, claims), explain),
	}
}
