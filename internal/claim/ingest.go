package claim

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Event is a verified, normalized webhook as ingest hands it over.
type Event struct {
	Provider    string
	ID          string
	Type        string
	ObjectID    string
	ContentType string
	Payload     []byte // raw bytes, exactly as received
}

// Outcome is what Claim did with an event.
type Outcome int

const (
	// Claimed: this call won the key; its deliveries and jobs are committed.
	Claimed Outcome = iota + 1
	// ClaimedIgnored: this call won the key but no route matched, so the
	// claim is recorded as ignored with no delivery.
	ClaimedIgnored
	// Duplicate: the key was already claimed; nothing changed.
	Duplicate
	// Reopened: the key was claimed and had failed; its failed deliveries
	// are processing again with a new job each.
	Reopened
)

// Result describes a Claim call.
type Result struct {
	Outcome Outcome
	// Status is the claim's status after the call.
	Status Status
	// Deliveries is how many deliveries this call enqueued.
	Deliveries int
}

// Duplicate reports whether the caller should answer "duplicate": true.
func (r Result) Duplicate() bool { return r.Outcome == Duplicate }

// claimSQL inserts the claim and, only if this statement inserted it, one
// delivery per route, in one round trip. ON CONFLICT DO NOTHING makes the
// primary key the arbiter: a concurrent insert of the same key waits for the
// winner's transaction and then does nothing.
const claimSQL = `
WITH claim AS (
    INSERT INTO webhook_event_claims
        (provider, event_id, event_type, object_id, status, payload, content_type)
    VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status)
    SELECT claim.provider, claim.event_id, route, 'processing'
    FROM claim CROSS JOIN unnest($8::text[]) AS route
)
SELECT count(*) FROM claim`

// Claim records ev and fans it out to routes (the names of the routes its
// type matches), all in one transaction: the claim row, one delivery row
// and one job per route. Only the call that inserts the claim does this;
// any other call for the same key is a Duplicate, except that with reopen a
// failed claim has its failed deliveries reopened (see Reopen). Nothing is
// committed when an error is returned.
func (s *Store) Claim(ctx context.Context, ev Event, routes []string, reopen bool) (Result, error) {
	var res Result
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = Result{}
		status := Processing
		if len(routes) == 0 {
			status = Ignored
		}
		var won int
		if err := tx.QueryRow(ctx, claimSQL, ev.Provider, ev.ID, ev.Type, ev.ObjectID, status,
			ev.Payload, ev.ContentType, routes).Scan(&won); err != nil {
			return fmt.Errorf("inserting claim: %w", err)
		}
		if won == 1 {
			res = Result{Outcome: Claimed, Status: status, Deliveries: len(routes)}
			if status == Ignored {
				res.Outcome = ClaimedIgnored
			}
			return s.enqueue(ctx, tx, ev.Provider, ev.ID, routes)
		}
		res.Outcome = Duplicate
		if reopen {
			n, err := s.reopenTx(ctx, tx, ev.Provider, ev.ID, false)
			var conflict *statusConflict
			switch {
			case err == nil:
				res = Result{Outcome: Reopened, Status: Processing, Deliveries: n}
				return nil
			case errors.As(err, &conflict):
				// The status reopenTx read is the duplicate's answer.
				res.Status = conflict.status
				return nil
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if err := tx.QueryRow(ctx, `SELECT status FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`,
			ev.Provider, ev.ID).Scan(&res.Status); err != nil {
			return fmt.Errorf("reading existing claim: %w", err)
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	return res, nil
}
