package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReconcileResult counts what one Reconcile pass did.
type ReconcileResult struct {
	Requeued int
	Failed   int
	// Released counts waiting deliveries released because their
	// predecessors had all completed.
	Released int
}

// Reconcile finds deliveries still processing, untouched for at least
// olderThan, that no live job will run (the job was deleted, discarded by
// the rescuer after a crash on its last attempt, cancelled by an operator,
// or completed outside a delivery's transaction), and converges them: a
// discarded or cancelled job fails the delivery with the reason; otherwise
// a new job is enqueued (same key downstream). Each delivery is handled in
// its own transaction under its claim's lock, re-checked there, so a
// concurrent reopen or retry is never doubled.
func (s *Store) Reconcile(ctx context.Context, olderThan time.Duration, limit int) (ReconcileResult, error) {
	var res ReconcileResult
	keys, err := s.river().DeliveryListWithoutLiveJob(ctx, olderThan, limit)
	if err != nil {
		return res, fmt.Errorf("finding orphaned deliveries: %w", err)
	}
	stranded, err := s.river().DeliveryListStranded(ctx, olderThan, limit)
	if err != nil {
		return res, fmt.Errorf("finding stranded waiting deliveries: %w", err)
	}
	for _, k := range stranded {
		n, err := s.releaseOne(ctx, k)
		if err != nil {
			return res, fmt.Errorf("releasing %s: %w", k, err)
		}
		res.Released += n
	}
	for _, k := range keys {
		failed, err := s.reconcileOne(ctx, k)
		switch {
		case errors.Is(err, ErrConflict): // settled meanwhile
		case err != nil:
			return res, fmt.Errorf("reconciling %s: %w", k, err)
		case failed:
			res.Failed++
		default:
			res.Requeued++
		}
	}
	return res, nil
}

// releaseOne releases, under its claim's lock, the waiting deliveries of
// k's claim whose predecessors have all completed (k's among them, unless
// settled meanwhile), and enqueues their jobs, in one transaction. It
// returns how many it released.
func (s *Store) releaseOne(ctx context.Context, k Key) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *Store) error {
		a := []Attempt{{Key: k}}
		var b pgx.Batch
		queueLockClaims(&b, a)
		released := queueRelease(&b, a)
		if err := tx.db.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		n = len(*released)
		return tx.enqueueKeys(ctx, *released, nil)
	})
	return n, err
}

func (s *Store) reconcileOne(ctx context.Context, k Key) (failed bool, err error) {
	err = s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT 1 FROM webhook_event_claims WHERE provider = $1 AND event_id = $2 FOR UPDATE`,
			k.Provider, k.EventID); err != nil {
			return err
		}
		// The latest job explains the orphan only if it was finalized
		// since the delivery last changed: one finalized before (e.g. the
		// discarded job of a delivery reopened since, whose new job was
		// deleted) says nothing about the current run, which is requeued.
		orphan, lastState, lastAttempts, err := tx.river().DeliveryGetLatestJob(ctx, k)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !orphan) {
			return ErrConflict
		}
		if err != nil {
			return err
		}
		// The latest job's attempts are spent numbers when it finalized
		// since the delivery last changed (a crash on its last attempt
		// leaves them unrecorded): a requeued job continues after them.
		spent := 0
		if lastState != nil && lastAttempts != nil {
			spent = *lastAttempts
		}
		var reason string
		switch {
		case lastState != nil && *lastState == "discarded":
			reason = fmt.Sprintf("delivery job was discarded after %d attempts (a worker stopped during its last attempt)", *lastAttempts)
		case lastState != nil && *lastState == "cancelled":
			reason = "delivery job was cancelled outside hookgate"
		}
		if reason != "" {
			failed = true
			return tx.RecordAttempt(ctx, k, AttemptResult{Status: DeliveryFailed, Error: "reconciler: " + reason, Spent: spent})
		}
		if _, err := tx.db.Exec(ctx, `UPDATE webhook_deliveries SET updated_at = now(), attempt_base = attempt_base + $4
WHERE provider = $1 AND event_id = $2 AND route = $3`, k.Provider, k.EventID, k.Route, spent); err != nil {
			return err
		}
		return tx.enqueue(ctx, k.Provider, k.EventID, []string{k.Route}, nil)
	})
	return failed, err
}
