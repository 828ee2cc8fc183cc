package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
)

// JobKind is the River job kind of JobArgs (hookgate.reconcile is
// maintenance's reconciler of deliveries and jobs).
const JobKind = "hookgate.provider_reconcile"

// JobArgs is the periodic job that runs one provider's reconciliation.
type JobArgs struct {
	Provider string `json:"provider"`
}

// Kind implements river.JobArgs.
func (JobArgs) Kind() string { return JobKind }

// Worker is the River worker of JobArgs. Only River's elected leader
// enqueues periodic jobs; should two runs of a provider meet anyway (one
// outlasting its interval, or one asked for by hand), the provider's lock
// lets one through and the other ends at once (claim.Store.LockReconcile).
type Worker struct {
	river.WorkerDefaults[JobArgs]

	r       *Reconciler
	timeout time.Duration
	logger  *slog.Logger
}

// NewWorker returns the worker of r's scheduled runs; timeout bounds one
// run and must be below worker.rescue_after.
func NewWorker(r *Reconciler, timeout time.Duration) *Worker {
	return &Worker{r: r, timeout: timeout, logger: r.logger}
}

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[JobArgs]) time.Duration { return w.timeout }

// Work implements river.Worker: one run. A run that failed is recorded and
// logged, and the job still completes: the next run comes as scheduled,
// never as a retry loop against a provider that refuses the key.
func (w *Worker) Work(ctx context.Context, job *river.Job[JobArgs]) error {
	_, err := w.r.Run(ctx, Run{Provider: job.Args.Provider, Trigger: claim.TriggerSchedule})
	switch {
	case errors.Is(err, claim.ErrReconcileRunning):
		w.logger.LogAttrs(ctx, slog.LevelInfo, "reconciliation already running elsewhere; this run is skipped",
			slog.String("provider", job.Args.Provider))
	case err != nil && !isRunError(err):
		// Not the provider's answer: the run could not be recorded.
		w.logger.LogAttrs(ctx, slog.LevelError, "reconciliation could not run",
			slog.String("provider", job.Args.Provider), slog.String("error", err.Error()))
	}
	return nil
}

func isRunError(err error) bool {
	var re *RunError
	return errors.As(err, &re)
}

// PeriodicJobs returns one periodic job per provider that reconciles, each
// every its reconcile.every, and once at start.
func (r *Reconciler) PeriodicJobs() []*river.PeriodicJob {
	return r.PeriodicJobsFor(func(string) bool { return true })
}

// PeriodicJobsFor is PeriodicJobs for the providers keep accepts: with
// cells, those of the cell whose River client schedules them.
func (r *Reconciler) PeriodicJobsFor(keep func(provider string) bool) []*river.PeriodicJob {
	var jobs []*river.PeriodicJob
	for _, name := range r.Providers() {
		if !keep(name) {
			continue
		}
		every := r.provider(name).Reconcile.Every.D()
		jobs = append(jobs, river.NewPeriodicJob(river.PeriodicInterval(every),
			func() (river.JobArgs, *river.InsertOpts) {
				// One attempt: the next period is the retry.
				return JobArgs{Provider: name}, &river.InsertOpts{MaxAttempts: 1}
			},
			&river.PeriodicJobOpts{ID: JobKind + "/" + name, RunOnStart: true}))
	}
	return jobs
}
