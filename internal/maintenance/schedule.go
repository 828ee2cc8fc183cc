package maintenance

import (
	"time"

	"github.com/riverqueue/river"
)

// schedule is what every maintenance worker shares (and River's defaults
// for the rest of river.Worker): a periodic River job of
// kind, run every interval and once at start, each run bounded by timeout.
// Only River's elected leader enqueues periodic jobs, so replicas do not
// multiply them; should two runs overlap anyway (one outlasting the
// interval), the store operation each runs is safe to share (see
// claim.Store.Prune and claim.Store.Reconcile).
type schedule[T river.JobArgs] struct {
	river.WorkerDefaults[T]

	kind     string
	interval time.Duration
	timeout  time.Duration
}

// PeriodicJob schedules the job every interval, and once at start, so that
// a worker restarted more often than that still runs it.
func (s schedule[T]) PeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(s.interval),
		func() (river.JobArgs, *river.InsertOpts) {
			var args T
			// One attempt: the next period is the retry.
			return args, &river.InsertOpts{MaxAttempts: 1}
		},
		&river.PeriodicJobOpts{ID: s.kind, RunOnStart: true})
}

// Timeout implements river.Worker.
func (s schedule[T]) Timeout(*river.Job[T]) time.Duration { return s.timeout }
