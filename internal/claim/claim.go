// Package claim owns the claim and delivery tables: who won an event, which
// deliveries it fans out to, and how their outcomes roll up. All of their SQL
// lives here, so the rules of the contract are written down once.
package claim

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Status is the state of a claim: the roll-up of its deliveries.
type Status string

// Claim statuses, per the contract.
const (
	Processing Status = "processing"
	Completed  Status = "completed"
	Failed     Status = "failed"
	// Ignored: no route matched the event, or every delivery was skipped.
	Ignored Status = "ignored"
)

// DeliveryStatus is the state of one delivery. It is a type of its own
// because the two sets differ: a delivery is never ignored, a claim is never
// skipped.
type DeliveryStatus string

// Delivery statuses, per the contract.
const (
	DeliveryProcessing DeliveryStatus = "processing"
	DeliveryCompleted  DeliveryStatus = "completed"
	DeliveryFailed     DeliveryStatus = "failed"
	// DeliverySkipped: another claim holds the route's business key for
	// this event, so the delivery has no job and makes no downstream call.
	DeliverySkipped DeliveryStatus = "skipped"
)

// ErrNotFound is returned when a claim or delivery does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when an operation does not apply to a claim's
// current status (e.g. retrying a completed claim without force).
var ErrConflict = errors.New("conflict")

// DeliveryArgs is the River job for one delivery. It references the delivery
// rather than carrying the payload, so a job row stays small and the payload
// is stored once, on the claim.
type DeliveryArgs struct {
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Route    string `json:"route"`
}

// DeliveryKind is the River job kind of DeliveryArgs.
const DeliveryKind = "hookgate.delivery"

// Kind implements river.JobArgs.
func (DeliveryArgs) Kind() string { return DeliveryKind }

// Inserter is the part of a River client the store needs: insert jobs in the
// caller's transaction, so they commit or vanish with the rows that need them.
type Inserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// Store reads and writes claims and deliveries.
type Store struct {
	pool  *pgxpool.Pool
	jobs  Inserter
	limit func(route string) int
}

// NewStore returns a store over pool that enqueues with jobs. maxAttempts
// gives a route's max_attempts for the jobs it enqueues, which go on the
// route's own queue (see Queue); for a route that no longer exists it
// returns 0, and the job goes on the default queue with River's default
// max attempts (the worker then fails the delivery with the reason on its
// first attempt).
func NewStore(pool *pgxpool.Pool, jobs Inserter, maxAttempts func(route string) int) *Store {
	return &Store{pool: pool, jobs: jobs, limit: maxAttempts}
}

// enqueue inserts one delivery job per route in tx, with meta (nil for
// none) as the jobs' metadata.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, provider, eventID string, routes []string, meta []byte) error {
	if len(routes) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(routes))
	for i, r := range routes {
		params[i] = s.deliveryJob(provider, eventID, r)
		params[i].InsertOpts.Metadata = meta
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("enqueueing %d delivery jobs: %w", len(routes), err)
	}
	return nil
}

// inTx runs fn in a transaction and commits it when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
