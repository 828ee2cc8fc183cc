package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Delivery is one (claim, route) pair with what the worker needs to attempt
// it: the claim's normalized fields and raw payload.
type Delivery struct {
	Provider     string
	EventID      string
	Route        string
	Status       Status
	AttemptCount int
	LastError    string
	UpdatedAt    time.Time
	CompletedAt  *time.Time

	EventType   string
	ObjectID    string
	ContentType string
	// Payload is nil once retention has cleared it.
	Payload []byte
	// ClaimFirstSeen is when ingest first accepted the event.
	ClaimFirstSeen time.Time
}

// Key identifies one delivery.
type Key struct{ Provider, EventID, Route string }

func (k Key) String() string { return k.Provider + "/" + k.EventID + "/" + k.Route }

// Querier runs a query returning one row: a pool, a connection or a
// transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LoadDelivery returns the delivery with its claim's payload.
func (s *Store) LoadDelivery(ctx context.Context, k Key) (Delivery, error) {
	return LoadDelivery(ctx, s.pool, k)
}

// LoadDelivery is Store.LoadDelivery through q, for a caller that reads in a
// transaction of its own (a worker under test runs inside one).
func LoadDelivery(ctx context.Context, q Querier, k Key) (Delivery, error) {
	var d Delivery
	err := q.QueryRow(ctx, `
SELECT d.status, d.attempt_count, coalesce(d.last_error, ''), d.updated_at, d.completed_at,
       c.event_type, coalesce(c.object_id, ''), c.content_type, c.payload, c.first_seen_at
FROM webhook_deliveries d
JOIN webhook_event_claims c USING (provider, event_id)
WHERE d.provider = $1 AND d.event_id = $2 AND d.route = $3`, k.Provider, k.EventID, k.Route).Scan(
		&d.Status, &d.AttemptCount, &d.LastError, &d.UpdatedAt, &d.CompletedAt,
		&d.EventType, &d.ObjectID, &d.ContentType, &d.Payload, &d.ClaimFirstSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, fmt.Errorf("loading delivery %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("loading delivery %s: %w", k, err)
	}
	d.Provider, d.EventID, d.Route = k.Provider, k.EventID, k.Route
	return d, nil
}

// AttemptResult is what one downstream attempt did to a delivery.
type AttemptResult struct {
	// Status is the delivery's new status: Completed, Failed (no further
	// attempts), or Processing (another attempt will follow).
	Status Status
	// Attempted is true when a downstream call was made (and so counts as an
	// attempt); false when the delivery is failed without one, e.g. because
	// its route no longer exists.
	Attempted bool
	// Error is the sanitized reason of a failed attempt; empty on success.
	Error string
}

// RecordAttempt writes an attempt's outcome into tx: the delivery's status,
// attempt count and last error, then the claim's roll-up. It locks the claim
// row first, so that roll-ups of concurrent deliveries of one claim are
// serialized and the claim's status is computed from committed siblings.
// The caller commits tx, typically together with completing the job.
func RecordAttempt(ctx context.Context, tx pgx.Tx, k Key, r AttemptResult) error {
	var locked int
	err := tx.QueryRow(ctx, `SELECT 1 FROM webhook_event_claims WHERE provider = $1 AND event_id = $2 FOR UPDATE`,
		k.Provider, k.EventID).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("recording attempt for %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("locking claim of %s: %w", k, err)
	}
	attempts := 0
	if r.Attempted {
		attempts = 1
	}
	var lastErr *string
	if r.Error != "" {
		lastErr = &r.Error
	}
	tag, err := tx.Exec(ctx, `
UPDATE webhook_deliveries SET
    status = $4,
    attempt_count = attempt_count + $5,
    last_error = coalesce($6, last_error),
    completed_at = CASE WHEN $4 = 'completed' THEN now() END,
    updated_at = now()
WHERE provider = $1 AND event_id = $2 AND route = $3 AND status = 'processing'`,
		k.Provider, k.EventID, k.Route, r.Status, attempts, lastErr)
	if err != nil {
		return fmt.Errorf("updating delivery %s: %w", k, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("updating delivery %s: it is no longer processing: %w", k, ErrConflict)
	}
	return rollUp(ctx, tx, k.Provider, k.EventID, attempts, lastErr)
}

// rollUp recomputes a claim's status from its deliveries: completed once all
// are completed, failed once one failed and none is processing, else
// processing. The caller holds the claim row's lock.
func rollUp(ctx context.Context, tx pgx.Tx, provider, eventID string, attempts int, lastErr *string) error {
	_, err := tx.Exec(ctx, `
WITH s AS (
    SELECT count(*) FILTER (WHERE status = 'processing') AS processing,
           count(*) FILTER (WHERE status = 'failed')     AS failed
    FROM webhook_deliveries WHERE provider = $1 AND event_id = $2
), n AS (
    SELECT CASE WHEN processing > 0 THEN 'processing'
                WHEN failed > 0     THEN 'failed'
                ELSE 'completed' END AS status
    FROM s
)
UPDATE webhook_event_claims c SET
    status = n.status,
    completed_at = CASE WHEN n.status = 'completed' THEN coalesce(c.completed_at, now()) END,
    attempt_count = c.attempt_count + $3,
    last_error = coalesce($4, c.last_error),
    updated_at = now()
FROM n
WHERE c.provider = $1 AND c.event_id = $2 AND c.status <> 'ignored'`, provider, eventID, attempts, lastErr)
	if err != nil {
		return fmt.Errorf("rolling up claim %s/%s: %w", provider, eventID, err)
	}
	return nil
}

// Reopen puts a failed claim's failed deliveries back to processing and
// enqueues a job for each, in one transaction. With force it also re-runs a
// claim's completed deliveries (same keys downstream), and accepts completed
// claims. It returns how many deliveries were reopened; ErrConflict when the
// claim's status does not allow it, ErrNotFound when there is no such claim.
func (s *Store) Reopen(ctx context.Context, provider, eventID string, force bool) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		n, err = s.reopenTx(ctx, tx, provider, eventID, force)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reopening %s/%s: %w", provider, eventID, err)
	}
	return n, nil
}

func (s *Store) reopenTx(ctx context.Context, tx pgx.Tx, provider, eventID string, force bool) (int, error) {
	// The status guard in WHERE is what makes two concurrent reopens act
	// once: the second waits for the first's row lock, re-reads the row,
	// finds it processing and updates nothing.
	allowed := []string{string(Failed)}
	if force {
		allowed = append(allowed, string(Completed))
	}
	tag, err := tx.Exec(ctx, `
UPDATE webhook_event_claims SET status = 'processing', completed_at = NULL, updated_at = now()
WHERE provider = $1 AND event_id = $2 AND status = ANY($3)`, provider, eventID, allowed)
	if err != nil {
		return 0, fmt.Errorf("reopening claim: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var status Status
		err := tx.QueryRow(ctx, `SELECT status FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`,
			provider, eventID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, ErrNotFound
		}
		if err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("claim is %s: %w", status, ErrConflict)
	}
	rows, err := tx.Query(ctx, `
UPDATE webhook_deliveries SET status = 'processing', completed_at = NULL, updated_at = now()
WHERE provider = $1 AND event_id = $2 AND status = ANY($3)
RETURNING route`, provider, eventID, allowed)
	if err != nil {
		return 0, fmt.Errorf("reopening deliveries: %w", err)
	}
	routes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("reopening deliveries: %w", err)
	}
	return len(routes), s.enqueue(ctx, tx, provider, eventID, routes)
}
