package claim

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Reopen puts a failed claim's failed deliveries back to processing and
// enqueues a job for each, in one transaction. With force it also re-runs a
// claim's completed deliveries (same keys downstream), and accepts completed
// claims. It returns how many deliveries were reopened; ErrConflict when the
// claim's status does not allow it, ErrNotFound when there is no such claim.
func (s *Store) Reopen(ctx context.Context, provider, eventID string, force bool) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *Store) (err error) {
		n, err = tx.reopenTx(ctx, provider, eventID, force, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reopening %s/%s: %w", provider, eventID, err)
	}
	return n, nil
}

// statusConflict is ErrConflict with the claim's status, which a caller
// answering a duplicate needs anyway.
type statusConflict struct {
	status Status
	why    string
}

func (e *statusConflict) Error() string {
	if e.why != "" {
		return fmt.Sprintf("claim is %s but %s", e.status, e.why)
	}
	return fmt.Sprintf("claim is %s", e.status)
}

func (e *statusConflict) Unwrap() error { return ErrConflict }

// ConflictStatus returns the status of the claim that Reopen refused with
// err, and whether err is such a refusal, so that a caller can say why
// without reading the claim again.
func ConflictStatus(err error) (Status, bool) {
	var c *statusConflict
	if errors.As(err, &c) {
		return c.status, true
	}
	return "", false
}

// reopenTx does the work of Reopen in s's transaction: it reopens the
// failed (with force, also completed) deliveries of a claim and enqueues a
// job for each, with meta as their metadata.
func (s *Store) reopenTx(ctx context.Context, provider, eventID string, force bool, meta []byte) (int, error) {
	allowed := []string{string(Failed)}
	if force {
		allowed = append(allowed, string(Completed))
	}
	// Lock the claim only if its status allows a reopen: a duplicate of a
	// processing claim, the common case, takes no lock. The guard is what
	// makes two concurrent reopens act once: the second waits for the
	// first's lock, re-reads the row, finds it processing and stops.
	var status Status
	err := s.db.QueryRow(ctx, `SELECT status FROM webhook_event_claims
WHERE provider = $1 AND event_id = $2 AND status = ANY($3) FOR UPDATE`, provider, eventID, allowed).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		err := s.db.QueryRow(ctx, `SELECT status FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`,
			provider, eventID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, ErrNotFound
		}
		if err != nil {
			return 0, err
		}
		return 0, &statusConflict{status: status}
	}
	if err != nil {
		return 0, fmt.Errorf("locking claim: %w", err)
	}
	// Deliveries first, so that a claim with nothing to reopen is left as
	// it is rather than processing with no delivery to finish it. Skipped
	// deliveries are never reopened, not even with force: another claim
	// holds their business key. Nor are those failed because their key
	// could not be computed: they would run without it.
	//
	// With force, a delivery that runs after others goes back to waiting
	// (its predecessors run again first; their completion releases it).
	// Without, only failed deliveries reopen, and a failed one that waited
	// had its predecessors completed, so it runs at once; those still
	// waiting behind a failed predecessor are released when it completes.
	rows, err := s.db.Query(ctx, `
UPDATE webhook_deliveries
SET status = CASE WHEN $4 AND cardinality(waits_for) > 0 THEN 'waiting' ELSE 'processing' END,
    completed_at = NULL, result = NULL, updated_at = now()
WHERE provider = $1 AND event_id = $2 AND status = ANY($3) AND NOT business_key_missing
RETURNING route, status`, provider, eventID, allowed, force)
	if err != nil {
		return 0, fmt.Errorf("reopening deliveries: %w", err)
	}
	type reopened struct {
		Route  string
		Status DeliveryStatus
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[reopened])
	if err != nil {
		return 0, fmt.Errorf("reopening deliveries: %w", err)
	}
	var routes []string
	for _, r := range all {
		if r.Status == DeliveryProcessing {
			routes = append(routes, r.Route)
		}
	}
	if len(all) == 0 {
		return 0, &statusConflict{status: status, why: "it has no delivery to reopen"}
	}
	if _, err := s.db.Exec(ctx, `
UPDATE webhook_event_claims SET status = 'processing', completed_at = NULL, updated_at = now()
WHERE provider = $1 AND event_id = $2`, provider, eventID); err != nil {
		return 0, fmt.Errorf("reopening claim: %w", err)
	}
	return len(all), s.enqueue(ctx, provider, eventID, routes, meta)
}

// reopenBatch is how many claims ReopenMatching reads at a time.
const reopenBatch = 500

// ReopenMatching reopens every claim f matches, as Reopen does one, newest
// first. It pages through them by keyset, f.Limit (0: 500) at a time, so
// it reaches any number of claims and visits each once; each claim is
// reopened in a transaction of its own (in a store Transact handed out, a
// savepoint of its transaction, which then commits them all at once), and
// one refused (not failed any more, say) or deleted meanwhile is skipped.
// reopened, when not nil, is called after each claim reopened with its
// deliveries reopened. It returns the claims visited and reopened and the
// deliveries reopened, so far also with an error.
func (s *Store) ReopenMatching(ctx context.Context, f Search, force bool, reopened func(k EventKey, deliveries int)) (matched, claims, deliveries int, err error) {
	if f.Limit <= 0 {
		f.Limit = reopenBatch
	}
	f.After, f.Newer = nil, nil
	for {
		page, err := s.SearchClaims(ctx, f)
		if err != nil {
			return matched, claims, deliveries, err
		}
		for _, c := range page {
			matched++
			var n int
			err := s.Transact(ctx, func(tx *Store) (err error) {
				n, err = tx.Reopen(ctx, c.Provider, c.EventID, force)
				return err
			})
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return matched, claims, deliveries, err
			}
			claims++
			deliveries += n
			if reopened != nil {
				reopened(EventKey{Provider: c.Provider, EventID: c.EventID}, n)
			}
		}
		if len(page) < f.Limit {
			return matched, claims, deliveries, nil
		}
		last := page[len(page)-1].Position()
		f.After = &last
	}
}
