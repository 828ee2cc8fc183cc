package deliver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/batch"
	"github.com/hookgate/hookgate/internal/claim"
)

// maxBatch caps how many job ends one transaction carries.
const maxBatch = 128

// endConcurrency is how many end transactions run at once, so that one
// executes while another waits for its commit to be flushed. Each locks
// its claims in key order and then its jobs, so two never deadlock.
const endConcurrency = 2

// completer ends delivery jobs: each job's final outcome is written in the
// transaction that completes the job. Concurrent ends share a transaction
// (see batch.Combiner), so that a hundred deliveries finishing together cost one
// commit rather than a hundred; commits, not statements, are what bound a
// worker's rate.
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
	ctx     context.Context // the job's Work context, for River's client
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
	r, err := c.batch.Do(wctx, &ending{ctx: ctx, job: job, attempt: a})
	if err != nil {
		return failedToRecord, fmt.Errorf("recording the outcome of %s: %w", a.Key, err)
	}
	return r, nil
}

// run ends batch in one transaction: lock the claims in key order, then the
// jobs still running the attempt that ended (River's fence: a job rescued
// meanwhile is left alone and its delivery untouched), complete those jobs,
// record their outcomes, commit.
func (c *completer) run(ctx context.Context, batch []*ending) ([]endResult, error) {
	results := make([]endResult, len(batch))
	err := c.store.Transact(ctx, func(st *claim.Store) error { return c.runIn(ctx, st, batch, results) })
	return results, err
}

// runIn does the work of run in st's transaction, filling in results.
func (c *completer) runIn(ctx context.Context, st *claim.Store, batch []*ending, results []endResult) error {
	tx := st.Tx()
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	// Claims first, in key order, then jobs: every path that settles a
	// delivery takes its claim's lock before its job's, so two batches
	// sharing a job wait at the claim instead of deadlocking.
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := batch[a].attempt.Key, batch[b].attempt.Key
		return cmp.Or(cmp.Compare(ka.Provider, kb.Provider), cmp.Compare(ka.EventID, kb.EventID),
			cmp.Compare(ka.Route, kb.Route))
	})
	keys := make([]claim.Key, len(batch))
	for j, i := range order {
		keys[j] = batch[i].attempt.Key
	}
	if err := st.LockClaims(ctx, keys...); err != nil {
		return err
	}

	// River's fence. JobCompleteTx completes whatever job row is running,
	// even one River rescued and started again elsewhere (a higher attempt),
	// so first lock the rows of the jobs still running this very attempt;
	// the others were rescued, their runs own the deliveries now.
	ids, attempts := make([]int64, len(batch)), make([]int32, len(batch))
	for i, e := range batch {
		ids[i], attempts[i] = e.job.ID, int32(e.job.Attempt)
	}
	live, err := claim.LockRunningJobs(ctx, tx, ids, attempts)
	if err != nil {
		return err
	}

	var record []claim.Attempt
	var recordIdx []int
	var complete []int64
	for _, i := range order {
		e := batch[i]
		if !slices.Contains(live, e.job.ID) {
			results[i] = rescued
			continue
		}
		complete = append(complete, e.job.ID)
		record = append(record, e.attempt)
		recordIdx = append(recordIdx, i)
	}
	// What river.JobCompleteTx does, for the batch in one statement (see
	// claim.CompleteJobs on why not the public call per job).
	if err := claim.CompleteJobs(ctx, tx, complete); err != nil {
		return err
	}
	if len(record) > 0 {
		recorded, err := st.RecordAttempts(ctx, record)
		if err != nil {
			return err
		}
		for j, i := range recordIdx {
			results[i] = settled
			if recorded[j] {
				results[i] = ended
			}
		}
	}
	return nil
}
