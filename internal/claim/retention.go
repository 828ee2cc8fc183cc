package claim

import (
	"context"
	"fmt"
	"time"
)

// Retention says what Prune removes. Ages count from terminal_at, the moment
// a claim last became terminal (completed, failed or ignored); processing
// claims have none and are never touched.
type Retention struct {
	// Claims: terminal claims older than this are deleted, with their
	// deliveries and every row that references the claim ON DELETE CASCADE.
	Claims time.Duration
	// Payloads: terminal claims older than this, and not yet old enough to
	// be deleted, have their raw payload cleared. At most Claims.
	Payloads time.Duration
	// BatchSize is how many claims one statement deletes or clears. Each
	// statement is a transaction of its own; 0 means 1000.
	BatchSize int
}

// PruneResult counts what one Prune did (or, dry, would do).
type PruneResult struct {
	Deleted         int `json:"deleted"`
	PayloadsCleared int `json:"payloads_cleared"`
	// RunsDeleted counts reconciliation runs (reconcile_runs) older than
	// Retention.Claims, deleted with the claims.
	RunsDeleted int `json:"runs_deleted,omitempty"`
}

// The two retention statements. Each picks one batch through its partial
// index on terminal_at, oldest first, with FOR UPDATE SKIP LOCKED: a claim
// whose row lock is held (a reopen or retry turning it back to processing, a
// roll-up, another prune) is skipped, never waited for, and is looked at
// again by the next run. A claim whose reopen committed after this
// statement's snapshot is re-checked under the lock (READ COMMITTED
// re-evaluates the WHERE clause on the newest row version), finds
// terminal_at NULL and is left alone.
//
// The batch is then reached by the row addresses (ctid) it locked, which
// cannot move while it holds the locks: a Tid Scan whatever the table's
// size. A join back on (provider, event_id) is planned as a hash join over
// the whole table, since Postgres misestimates a two-column match.
const (
	// clearPayloadsSQL clears the payloads of claims due for clearing but
	// not for deletion, so that a backlog is not written twice, and with
	// each the responses of its attempt history (webhook_attempts), their
	// headers and the requests sent, in the same statement. It returns how
	// many payloads it cleared.
	clearPayloadsSQL = `
WITH cleared AS (
    UPDATE webhook_event_claims SET payload = NULL
    WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM webhook_event_claims
        WHERE terminal_at IS NOT NULL AND payload IS NOT NULL
          AND terminal_at < $1 AND terminal_at >= $2
        ORDER BY terminal_at
        LIMIT $3
        FOR UPDATE SKIP LOCKED))
    RETURNING provider, event_id
), responses AS (
    UPDATE webhook_attempts a SET response = NULL, response_headers = NULL, request = NULL
    FROM cleared c
    WHERE a.provider = c.provider AND a.event_id = c.event_id
      AND (a.response IS NOT NULL OR a.response_headers IS NOT NULL OR a.request IS NOT NULL)
)
SELECT count(*) FROM cleared`

	// deleteClaimsSQL deletes claims due for deletion. Deliveries (and any
	// other table keyed by the claim) go with them through ON DELETE
	// CASCADE, in the same statement.
	deleteClaimsSQL = `
DELETE FROM webhook_event_claims
WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM webhook_event_claims
    WHERE terminal_at IS NOT NULL AND terminal_at < $1
    ORDER BY terminal_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`

	countPayloadsSQL = `SELECT count(*) FROM webhook_event_claims
WHERE terminal_at IS NOT NULL AND payload IS NOT NULL AND terminal_at < $1 AND terminal_at >= $2`

	countClaimsSQL = `SELECT count(*) FROM webhook_event_claims
WHERE terminal_at IS NOT NULL AND terminal_at < $1`
)

// Prune applies r once: it clears the payloads that are due, then deletes
// the claims that are due, a batch per statement, until a batch comes back
// short, then the reconciliation runs as old as those claims. The cutoffs are fixed when it starts (by the database's clock), so
// a run ends even while claims keep becoming due; those are the next run's.
// Concurrent Prunes (replicas, an operator's `claims prune`) share the work
// without waiting on each other. On error, or when ctx ends between
// batches, it returns what it did so far with the error.
func (s *Store) Prune(ctx context.Context, r Retention) (PruneResult, error) {
	var res PruneResult
	batch := r.batchSize()
	payloadCut, claimCut, err := s.cutoffs(ctx, r)
	if err != nil {
		return res, err
	}
	for {
		var n int
		if err := s.db.QueryRow(ctx, clearPayloadsSQL, payloadCut, claimCut, batch).Scan(&n); err != nil {
			return res, fmt.Errorf("clearing payloads after %d: %w", res.PayloadsCleared, err)
		}
		res.PayloadsCleared += n
		if n < batch {
			break
		}
	}
	for {
		tag, err := s.db.Exec(ctx, deleteClaimsSQL, claimCut, batch)
		if err != nil {
			return res, fmt.Errorf("deleting claims after %d: %w", res.Deleted, err)
		}
		res.Deleted += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(batch) {
			break
		}
	}
	res.RunsDeleted, err = s.pruneReconcileRuns(ctx, claimCut, batch)
	return res, err
}

// PruneDue counts what Prune would do now, changing nothing.
func (s *Store) PruneDue(ctx context.Context, r Retention) (PruneResult, error) {
	var res PruneResult
	payloadCut, claimCut, err := s.cutoffs(ctx, r)
	if err != nil {
		return res, err
	}
	if err := s.db.QueryRow(ctx, countPayloadsSQL, payloadCut, claimCut).Scan(&res.PayloadsCleared); err != nil {
		return res, fmt.Errorf("counting payloads due for clearing: %w", err)
	}
	if err := s.db.QueryRow(ctx, countClaimsSQL, claimCut).Scan(&res.Deleted); err != nil {
		return res, fmt.Errorf("counting claims due for deletion: %w", err)
	}
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM reconcile_runs WHERE started_at < $1`, claimCut).Scan(&res.RunsDeleted); err != nil {
		return res, fmt.Errorf("counting reconciliation runs due for deletion: %w", err)
	}
	return res, nil
}

// cutoffs returns the terminal_at before which payloads are cleared and
// claims deleted, by the database's clock (the one terminal_at is set by).
func (s *Store) cutoffs(ctx context.Context, r Retention) (payloads, claims time.Time, err error) {
	if r.Claims <= 0 || r.Payloads <= 0 || r.Payloads > r.Claims {
		return payloads, claims, fmt.Errorf("retention: want 0 < payloads (%s) <= claims (%s)", r.Payloads, r.Claims)
	}
	var now time.Time
	if err := s.db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return payloads, claims, fmt.Errorf("reading the database clock: %w", err)
	}
	return now.Add(-r.Payloads), now.Add(-r.Claims), nil
}

func (r Retention) batchSize() int {
	if r.BatchSize <= 0 {
		return 1000
	}
	return r.BatchSize
}
