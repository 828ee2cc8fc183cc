// Package claim is hookgate's store in Postgres: the claim and delivery
// tables (who won an event, which deliveries it fans out to, how their
// outcomes roll up) and the data kept beside them: attempts, business keys,
// the routes' breakers, the audit, the routes' queues (River's, through its
// seam), the console's stats, retention. All of their SQL lives here, a file
// per kind of data, so that the rules of the contract are written down once.
package claim

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
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

// Delivery statuses, per the contract, that Go code of the store's
// callers sets or tests. The contract's fifth, "waiting" (the route runs
// after others, per after: in the config, that have not all completed; the
// delivery has no job until the transaction that completes the last of
// them releases it), is set and read only by the store's SQL.
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
// It is River's COPY insert: the store never reads the inserted rows back, and
// its jobs are never unique, the case the fast insert leaves out.
type Inserter interface {
	InsertManyFastTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) (int, error)
}

// DB is what a Store runs its statements on: a *pgxpool.Pool, or a pgx.Tx
// for a store inside a transaction (a test's rolled-back one, say).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store reads and writes hookgate's data: claims and their deliveries,
// attempts and business keys; the breakers (breaker.go), the audit
// (audit.go), the queues (queue.go, riverseam.go), the stats (stats.go,
// stats_activity.go) and retention (retention.go).
type Store struct {
	db DB
	// tx is the transaction of a store that Transact handed out: its
	// operations run in it rather than in one of their own.
	tx    pgx.Tx
	jobs  Inserter
	limit func(route string) int
}

// NewStore returns a store over db that enqueues with jobs. maxAttempts
// gives a route's max_attempts for the jobs it enqueues, which go on the
// route's own queue (see Queue); for a route that no longer exists it
// returns 0, and the job goes on the default queue with River's default
// max attempts (the worker then fails the delivery with the reason on its
// first attempt). A store that never enqueues (the worker's) may have
// neither.
func NewStore(db DB, jobs Inserter, maxAttempts func(route string) int) *Store {
	return &Store{db: db, jobs: jobs, limit: maxAttempts}
}

// Transact runs fn with a store whose every operation runs in one
// transaction, committed when fn returns nil and rolled back otherwise, so
// that callers compose operations atomically. Over a transaction already,
// it is a savepoint of it.
func (s *Store) Transact(ctx context.Context, fn func(*Store) error) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		in := *s
		in.db, in.tx = tx, tx
		return fn(&in)
	})
}

// inTx runs fn in s's transaction when s is one Transact handed out, else
// in a transaction of its own.
func (s *Store) inTx(ctx context.Context, fn func(*Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	return s.Transact(ctx, fn)
}
