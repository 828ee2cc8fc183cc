package deliver

import (
	"context"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/internal/batch"
	"github.com/hookgate/hookgate/internal/claim"
)

// loadBatch caps how many deliveries one query loads: each carries its
// payload, up to ingest.max_body_bytes.
const loadBatch = 32

// loadTimeout bounds one batch of loads.
const loadTimeout = 10 * time.Second

// loader reads the deliveries jobs are about to attempt. River starts jobs
// in bursts (a fetch of up to worker.concurrency at a time), so their loads
// share queries (see batch.Combiner) instead of queueing for connections one by one.
type loader struct {
	store interface {
		LoadDeliveries(ctx context.Context, keys []claim.Key) ([]*claim.Delivery, error)
	}
	batch batch.Combiner[claim.Key, *claim.Delivery]
}

func newLoader(db claim.DB) *loader {
	l := &loader{store: claim.NewStore(db, nil, nil)}
	l.batch = batch.Combiner[claim.Key, *claim.Delivery]{Max: loadBatch, Timeout: loadTimeout, Run: l.run,
		Isolate: batch.Refused}
	return l
}

// load returns the delivery k with its claim's payload, or claim.ErrNotFound.
// It gives up when ctx ends.
func (l *loader) load(ctx context.Context, k claim.Key) (claim.Delivery, error) {
	d, err := l.batch.Do(ctx, k)
	if err != nil {
		return claim.Delivery{}, err
	}
	if d == nil {
		return claim.Delivery{}, fmt.Errorf("loading delivery %s: %w", k, claim.ErrNotFound)
	}
	return *d, nil
}

func (l *loader) run(ctx context.Context, keys []claim.Key) ([]*claim.Delivery, error) {
	return l.store.LoadDeliveries(ctx, keys)
}
