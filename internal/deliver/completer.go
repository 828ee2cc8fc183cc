package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/batch"
	"github.com/hookgate/hookgate/internal/claim"
)

// maxBatch caps how many job ends one transaction carries.
const maxBatch = 128

// endConcurrency is how many end transactions run at once. One: an end is
// a single round trip (claim.Store.EndJobs), and the ends that arrive
// meanwhile make the next batch larger, which costs less per end than a
// second transaction beside it (docs/benchmarks.md). Were there more, each
// locks its claims in key order and then its jobs, so two never deadlock.
const endConcurrency = 1

// completer records the outcomes of delivery attempts and ends their
// jobs: each job's final outcome is written in the
// transaction that deletes the job's row. Concurrent ends share a transaction
// (see batch.Combiner), so that a hundred deliveries finishing together cost one
// commit rather than a hundred, and that transaction is one round trip
// (claim.Store.EndJobs): commits and round trips, not statements, are what
// bound a worker's rate.
type completer struct {
	db    claim.DB
	store *claim.Store
	// chained reports whether other routes run after a route, and
	// maxAttempts gives a route's max_attempts: a completion of a chained
	// route releases its dependents and inserts their jobs.
	chained     func(route string) bool
	maxAttempts func(route string) int
	batch       batch.Combiner[*ending, endResult]
	wait        time.Duration // the longest an end waits for its transaction
	timeout     time.Duration // bounds one record transaction
	metrics     *Metrics
}

// newCompleter returns a completer whose transactions each take at most
// timeout. When the database stops answering, a batch fails all its ends at
// once, and no end waits longer than twice timeout: the batch in flight,
// then its own. The jobs return an error, and River runs them again.
func newCompleter(db claim.DB, metrics *Metrics, timeout time.Duration, chained func(string) bool, maxAttempts func(string) int) *completer {
	c := &completer{db: db, store: claim.NewStore(db, nil, nil), wait: 2 * timeout, timeout: timeout, metrics: metrics,
		chained: chained, maxAttempts: maxAttempts}
	c.batch = batch.Combiner[*ending, endResult]{Max: maxBatch, Concurrency: endConcurrency, Timeout: timeout,
		Run: c.run, Isolate: batch.Refused, Observe: metrics.batch}
	return c
}

// ending is one job's end.
type ending struct {
	job     *river.Job[claim.DeliveryArgs]
	attempt claim.Attempt
	// jobs inserts the jobs of deliveries this end releases: the River
	// client running the job.
	jobs claim.Inserter
}

// endResult is how a job's end went.
type endResult int

const (
	// ended: the outcome is recorded and the job completed, committed.
	ended endResult = iota + 1
	// settled: the delivery was no longer processing (settled elsewhere);
	// nothing was recorded for it.
	settled
	// rescued: River took the job back during the run; a rescued copy owns
	// the delivery now and nothing was recorded.
	rescued
	// failedToRecord: the transaction failed; River runs the job again.
	failedToRecord
)

// end records a's outcome and completes job in one transaction, shared
// with whatever other ends are pending. It waits for that transaction
// however the job's own context ends (an answer that arrived as the worker
// began to stop is still written down), but no longer than c.wait.
func (c *completer) end(ctx context.Context, job *river.Job[claim.DeliveryArgs], a claim.Attempt) (endResult, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.wait)
	defer cancel()
	e := &ending{job: job, attempt: a}
	if a.Result.Release {
		client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
		if err != nil {
			return failedToRecord, fmt.Errorf("recording the outcome of %s: %w", a.Key, err)
		}
		e.jobs = client
	}
	r, err := c.batch.Do(wctx, e)
	if err != nil {
		return failedToRecord, fmt.Errorf("recording the outcome of %s: %w", a.Key, err)
	}
	return r, nil
}

// run ends batch in one transaction (see claim.Store.EndJobs): lock the
// claims in key order, then the jobs still running the attempt that ended
// (River's fence: a job rescued meanwhile is left alone and its delivery
// untouched), record their outcomes, complete those jobs, commit.
func (c *completer) run(ctx context.Context, batch []*ending) ([]endResult, error) {
	attempts, jobs := make([]claim.Attempt, len(batch)), make([]claim.JobRun, len(batch))
	store := c.store
	for i, e := range batch {
		attempts[i], jobs[i] = e.attempt, claim.JobRun{ID: e.job.ID, Attempt: e.job.Attempt}
		if e.jobs != nil && store == c.store {
			store = claim.NewStore(c.db, e.jobs, c.maxAttempts)
		}
	}
	live, recorded, err := store.EndJobs(ctx, attempts, jobs)
	if err != nil {
		return nil, err
	}
	results := make([]endResult, len(batch))
	for i := range batch {
		switch {
		case !live[i]:
			results[i] = rescued
		case recorded[i]:
			results[i] = ended
		default:
			results[i] = settled
		}
	}
	return results, nil
}

// finish records a final outcome (delivered, or failed for good) and completes
// the job, in one transaction (shared with other jobs ending at the same
// moment; see completer). attempted says whether a call was made.
func (c *completer) finish(ctx context.Context, job *river.Job[claim.DeliveryArgs], log *jobLog,
	d claim.Delivery, o callResult, attempted bool,
) error {
	k := claim.Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route}
	// The job ends: its attempt numbers are spent.
	res := claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: attempted, Spent: job.Attempt, Result: o.result,
		Release: c.chained(k.Route), Call: o.call}
	if !o.verdict.delivers() {
		res = claim.AttemptResult{Status: claim.DeliveryFailed, Attempted: attempted, Error: o.reason, Spent: job.Attempt, Call: o.call}
	}
	result, err := c.end(ctx, job, claim.Attempt{Key: k, Result: res})
	switch result {
	case failedToRecord:
		return err
	case settled:
		c.metrics.countRun(k.Route, runSkipped)
		log.Warn("delivery was settled elsewhere during this run; outcome not recorded", slog.String("verdict", o.verdict.String()))
		return nil
	case rescued:
		log.Warn("job was rescued during this run; the rescued run will record the outcome")
		return nil
	}
	if res.Status == claim.DeliveryCompleted {
		c.metrics.countRun(k.Route, runCompleted)
		c.metrics.completed(time.Since(d.ClaimFirstSeen))
		if o.resultErr != nil {
			log.Warn("delivered; the route's result could not be computed and none is recorded",
				slog.String("error", bound(o.resultErr.Error())))
		}
		log.Delivered()
		return nil
	}
	c.metrics.countRun(k.Route, runFailed)
	log.Error("delivery failed", slog.String("reason", o.reason))
	return nil
}

// retry records a failed attempt that another will follow, and returns the
// error that makes River schedule it (a *retryError, which carries the
// downstream's Retry-After for the worker's NextRetry).
func (c *completer) retry(ctx context.Context, job *river.Job[claim.DeliveryArgs], log *jobLog,
	d claim.Delivery, o callResult,
) error {
	k := claim.Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route}
	err := c.record(ctx, k, o.reason, 0, o.call)
	if errors.Is(err, claim.ErrConflict) || errors.Is(err, claim.ErrNotFound) {
		c.metrics.countRun(k.Route, runSkipped)
		log.Warn("delivery was settled elsewhere during this run", slog.String("verdict", o.verdict.String()))
		return nil
	}
	if err != nil {
		// The job is retried all the same; the attempt goes uncounted.
		log.Error("recording a failed attempt failed", slog.String("error", err.Error()))
	}
	c.metrics.countRun(k.Route, runRetry)
	log.Warn("attempt failed; will retry", slog.String("reason", o.reason),
		slog.Int("job_attempt", job.Attempt), slog.Int("max_attempts", job.MaxAttempts))
	return &retryError{reason: o.reason, retryAfter: o.retryAfter}
}

// interrupted handles a call cut short because the worker is stopping. The
// attempt is counted (the downstream may have seen it), and the context's
// error is returned, which River takes as a shutdown: the job goes back to
// the queue without using one of its attempts. River then hands the
// attempt's number back, so the record moves attempt_base on by one in its
// place. When the record fails, a plain error is returned instead: River
// keeps the attempt (and its number) used, and retries.
func (c *completer) interrupted(ctx context.Context, log *jobLog, d claim.Delivery, o callResult) error {
	k := claim.Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route}
	if o.unsent {
		// Stopped while shaping the body: nothing reached the downstream,
		// so no attempt number is spent.
		log.Info("attempt interrupted by shutdown before it was sent; the job returns to the queue")
		return fmt.Errorf("attempt of %s interrupted: %w", k, ctx.Err())
	}
	if err := c.record(ctx, k, "interrupted: the worker was stopping", 1, o.call); err != nil {
		log.Warn("recording an interrupted attempt failed; the job keeps the attempt", slog.String("error", err.Error()))
		return fmt.Errorf("attempt of %s interrupted and not recorded: %s", k, o.reason)
	}
	log.Info("attempt interrupted by shutdown; the job returns to the queue", slog.String("reason", o.reason))
	return fmt.Errorf("attempt of %s interrupted: %w", k, ctx.Err())
}

// record counts a failed attempt that leaves the delivery processing, and
// adds spent to its attempt_base; call is its attempt history row.
func (c *completer) record(ctx context.Context, k claim.Key, reason string, spent int, call *claim.Call) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	return c.store.RecordAttempt(ctx, k, claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: reason, Spent: spent, Call: call})
}
