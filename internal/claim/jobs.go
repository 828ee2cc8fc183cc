package claim

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// deliveryJob is one delivery job to insert: the delivery it runs and the
// job's metadata (nil for none).
type deliveryJob struct {
	Key  Key
	Meta []byte
}

// insertJobs inserts jobs in tx with one InsertManyFastTx (COPY), each on
// its route's queue with its route's max_attempts (Store.jobParams). It is
// the one place delivery jobs are built: at the claim, the release of
// waiting deliveries, a reopen and the reconciler's requeue.
func (s *Store) insertJobs(ctx context.Context, tx pgx.Tx, jobs []deliveryJob) error {
	if len(jobs) == 0 {
		return nil
	}
	if s.jobs == nil {
		return errors.New("enqueueing delivery jobs: this store has no job client")
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = s.jobParams(j.Key.Provider, j.Key.EventID, j.Key.Route)
		params[i].InsertOpts.Metadata = j.Meta
	}
	if _, err := s.jobs.InsertManyFastTx(ctx, tx, params); err != nil {
		return fmt.Errorf("enqueueing %d delivery jobs: %w", len(jobs), err)
	}
	return nil
}

// enqueueKeys inserts one delivery job per key in s's transaction, with
// meta (nil for none) as the jobs' metadata.
func (s *Store) enqueueKeys(ctx context.Context, keys []Key, meta []byte) error {
	jobs := make([]deliveryJob, len(keys))
	for i, k := range keys {
		jobs[i] = deliveryJob{k, meta}
	}
	return s.insertJobs(ctx, s.tx, jobs)
}

// enqueue inserts one delivery job per route of the event in s's
// transaction, with meta (nil for none) as the jobs' metadata.
func (s *Store) enqueue(ctx context.Context, provider, eventID string, routes []string, meta []byte) error {
	keys := make([]Key, len(routes))
	for i, r := range routes {
		keys[i] = Key{provider, eventID, r}
	}
	return s.enqueueKeys(ctx, keys, meta)
}
