package deliver

import (
	"context"
	"fmt"
	"time"

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

// completer ends delivery jobs: each job's final outcome is written in the
// transaction that completes the job. Concurrent ends share a transaction
// (see batch.Combiner), so that a hundred deliveries finishing together cost one
// commit rather than a hundred, and that transaction is one round trip
// (claim.Store.EndJobs): commits and round trips, not statements, are what
// bound a worker's rate.
type completer struct {
	store *claim.Store
	batch batch.Combiner[*ending, endResult]
	wait  time.Duration // the longest an end waits for its transaction
}

// newCompleter returns a completer whose transactions each take at most
// timeout. When the database stops answering, a batch fails all its ends at
// once, and no end waits longer than twice timeout: the batch in flight,
// then its own. The jobs return an error, and River runs them again.
func newCompleter(db claim.DB, metrics *Metrics, timeout time.Duration) *completer {
	c := &completer{store: claim.NewStore(db, nil, nil), wait: 2 * timeout}
	c.batch = batch.Combiner[*ending, endResult]{Max: maxBatch, Concurrency: endConcurrency, Timeout: timeout,
		Run: c.run, Isolate: claim.Refused, Observe: metrics.batch}
	return c
}

// ending is one job's end.
type ending struct {
	job     *river.Job[claim.DeliveryArgs]
	attempt claim.Attempt
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
	r, err := c.batch.Do(wctx, &ending{job: job, attempt: a})
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
	for i, e := range batch {
		attempts[i], jobs[i] = e.attempt, claim.JobRun{ID: e.job.ID, Attempt: e.job.Attempt}
	}
	live, recorded, err := c.store.EndJobs(ctx, attempts, jobs)
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
