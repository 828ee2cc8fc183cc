package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
)

// ReconcileKind is the River job kind of ReconcileArgs.
const ReconcileKind = "hookgate.reconcile"

// reconcileBatch bounds the deliveries one reconcile run converges; a larger
// backlog is worked through by the following runs.
const reconcileBatch = 500

// ReconcileArgs is the periodic job that converges deliveries left
// processing with no live job (see claim.Store.Reconcile).
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return ReconcileKind }

// Reconciler is the worker of ReconcileArgs.
type Reconciler struct {
	schedule[ReconcileArgs]

	db          claim.DB
	maxAttempts func(route string) int
	logger      *slog.Logger
}

// NewReconciler returns the reconcile worker. A delivery counts as orphaned
// once it has been untouched for interval (the reconcile period), so a run
// never races the ingest or retry that is about to give it a job. maxAttempts
// gives the max_attempts of requeued jobs; timeout bounds one run and must
// not exceed worker.rescue_after.
func NewReconciler(db claim.DB, maxAttempts func(route string) int, interval, timeout time.Duration, logger *slog.Logger) *Reconciler {
	return &Reconciler{schedule: schedule[ReconcileArgs]{kind: ReconcileKind, interval: interval, timeout: timeout},
		db: db, maxAttempts: maxAttempts, logger: logger}
}

// Work implements river.Worker. Requeued jobs are inserted with the running
// River client, found in ctx.
func (r *Reconciler) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return fmt.Errorf("reconciling: %w", err)
	}
	res, err := claim.NewStore(r.db, client, r.maxAttempts).Reconcile(ctx, r.interval, reconcileBatch)
	level := slog.LevelDebug
	if res.Requeued+res.Failed+res.Released > 0 {
		level = slog.LevelWarn
	}
	r.logger.Log(ctx, level, "reconciled deliveries left without a job",
		slog.Int("requeued", res.Requeued), slog.Int("failed", res.Failed), slog.Int("released", res.Released))
	if err != nil {
		return fmt.Errorf("reconciling: %w", err)
	}
	return nil
}
