package claim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Event is a verified, normalized webhook as ingest hands it over.
type Event struct {
	Provider    string
	ID          string
	Type        string
	ObjectID    string
	ContentType string
	// ContentEncoding is the request's Content-Encoding when not identity:
	// the payload's bytes are encoded that way and forwarded so.
	ContentEncoding string
	Payload         []byte // raw bytes, exactly as received
	// GuardBody turns on the replay guard for this event: the claim records
	// a hash of Payload, and a payload byte-identical to that of another
	// claim of the provider is a Replay (see ReplayGuard in config).
	GuardBody bool
	// BusinessKeys holds the event's business key for each route it
	// matches that has one (see BusinessKey); routes without one are absent.
	BusinessKeys []BusinessKey
	// JobMetadata, when set, is the JSON metadata of the jobs this event
	// enqueues: the accepting request's trace context, so that each
	// delivery attempt continues its trace.
	JobMetadata []byte
}

// BusinessKey is an event's business key for one route, computed at ingest
// from the verified event. Exactly one of Key and Missing is set.
type BusinessKey struct {
	Route string
	// Key is the route's listed values, encoded so that distinct lists give
	// distinct keys (a JSON array).
	Key string
	// Missing says why the key could not be computed, naming the field; the
	// route's delivery is then failed with it, never sent without its key.
	Missing string
}

// Decision is what Claim decided for one copy of an event.
type Decision int

const (
	// Claimed: this call won the key; its deliveries and jobs are committed.
	// When business keys left none of its deliveries to run (Result.Skipped,
	// Result.Unkeyed), its status is already ignored or failed.
	Claimed Decision = iota + 1
	// ClaimedIgnored: this call won the key but no route matched, so the
	// claim is recorded as ignored with no delivery.
	ClaimedIgnored
	// Duplicate: the key was already claimed; nothing changed.
	Duplicate
	// Reopened: the key was claimed and had failed; its failed deliveries
	// are processing again with a new job each.
	Reopened
	// Replay: the key is new but the body is byte-identical to that of
	// another claim of the provider (GuardBody); nothing changed.
	Replay
)

// Result describes a Claim call.
type Result struct {
	Decision Decision
	// Status is the claim's status after the call.
	Status Status
	// Deliveries is how many deliveries this call enqueued.
	Deliveries int
	// Skipped are the routes whose delivery this call skipped because
	// another claim holds its business key; nil when none.
	Skipped []string
	// Unkeyed are the routes whose delivery this call failed because its
	// business key could not be computed; nil when none.
	Unkeyed []string
}

// Duplicate reports whether the caller should answer "duplicate": true.
func (r Result) Duplicate() bool { return r.Decision == Duplicate || r.Decision == Replay }

// claimSQL inserts the claim and, only if this statement inserted it, one
// delivery per route, in one round trip. ON CONFLICT DO NOTHING makes the
// unique keys the arbiter: a concurrent insert of the same key waits for the
// winner's transaction and then does nothing.
//
// Business keys ride in the same statement. Each route comes with its key's
// hash ($9, NULL for a route without a business key) and, when the key could
// not be computed, why ($11). The bkeys CTE inserts the won claim's keys into
// webhook_business_keys, whose primary key (route, key_hash) is the arbiter
// as the claims' is for the delivery key: a key that is not returned is held
// by another claim, and its delivery is skipped, naming the holder. The
// holder is read in the same statement, so this stays one round trip; the
// one case it cannot see is a holder that committed while this statement
// waited on its key (after the statement's snapshot), and then holderSQL
// names it in a second statement. A route whose key is missing gets a failed
// delivery. The statement returns whether the claim was won, the routes
// skipped, the first skip reason, and whether a holder is still to be named.
//
// The replay guard rides on the same statement: $13 is the body's hash (NULL
// when the guard is off), and the claim's conflict clause names no target,
// so it catches either unique key, the primary key (provider, event_id) or
// the partial one on (provider, body_hash). Which one conflicted is told
// apart afterwards, by whether the key exists (see Claim).
const claimSQL = `
WITH claim AS (
    INSERT INTO webhook_event_claims
        (provider, event_id, event_type, object_id, status, payload, content_type, last_error,
         body_hash, content_encoding)
    VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7, $12, $13, $14)
    ON CONFLICT DO NOTHING -- either key: (provider, event_id) or (provider, body_hash)
    RETURNING provider, event_id
), routes AS (
    SELECT * FROM unnest($8::text[], $9::bytea[], $10::text[], $11::text[])
        AS r(route, key_hash, business_key, missing)
), bkeys AS (
    INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
    SELECT r.route, r.key_hash, r.business_key, claim.provider, claim.event_id
    FROM claim CROSS JOIN routes r
    WHERE r.key_hash IS NOT NULL
    ORDER BY r.route -- keys in one order across claims, so concurrent ones never deadlock
    ON CONFLICT (route, key_hash) DO NOTHING
    RETURNING route
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status, last_error, business_key_missing)
    SELECT claim.provider, claim.event_id, r.route,
           CASE WHEN r.missing IS NOT NULL THEN 'failed'
                WHEN lost THEN 'skipped'
                ELSE 'processing' END,
           CASE WHEN r.missing IS NOT NULL THEN r.missing
                WHEN lost THEN 'business key is held by ' || held.provider || '/' || held.event_id END,
           r.missing IS NOT NULL
    FROM claim CROSS JOIN routes r
    LEFT JOIN bkeys won ON won.route = r.route
    CROSS JOIN LATERAL (SELECT r.key_hash IS NOT NULL AND won.route IS NULL AS lost) l
    -- The statement's snapshot: holders committed before it began.
    LEFT JOIN webhook_business_keys held ON lost AND held.route = r.route AND held.key_hash = r.key_hash
    RETURNING route, status, last_error
)
SELECT (SELECT count(*) FROM claim),
       (SELECT array_agg(route ORDER BY route) FROM deliveries WHERE status = 'skipped'),
       (SELECT min(last_error) FROM deliveries WHERE status = 'skipped'),
       (SELECT count(*) > 0 FROM deliveries WHERE status = 'skipped' AND last_error IS NULL)`

// holderSQL names the holders claimSQL could not see, now that they have
// committed: it runs only when a claim lost a key to a concurrent one.
const holderSQL = `
UPDATE webhook_deliveries d
SET last_error = 'business key is held by ' || k.provider || '/' || k.event_id
FROM unnest($3::text[], $4::bytea[]) AS r(route, key_hash)
JOIN webhook_business_keys k ON k.route = r.route AND k.key_hash = r.key_hash
WHERE d.provider = $1 AND d.event_id = $2 AND d.route = r.route
  AND d.status = 'skipped' AND d.last_error IS NULL
RETURNING d.last_error`

// claimArgs are claimSQL's per-route arguments for ev and routes, and the
// message of the first route whose business key is missing (the claim's
// last_error), with routes ordered by name so that concurrent claims take
// their keys' locks in one order.
func claimArgs(ev Event, routes []string) (names []string, hashes [][]byte, keys, missing []*string, firstMissing *string) {
	byRoute := make(map[string]BusinessKey, len(ev.BusinessKeys))
	for _, k := range ev.BusinessKeys {
		byRoute[k.Route] = k
	}
	names = slices.Sorted(slices.Values(routes))
	hashes, keys, missing = make([][]byte, len(names)), make([]*string, len(names)), make([]*string, len(names))
	for i, r := range names {
		k, ok := byRoute[r]
		switch {
		case !ok:
		case k.Missing != "":
			missing[i] = &k.Missing
			if firstMissing == nil {
				firstMissing = &k.Missing
			}
		default:
			sum := sha256.Sum256([]byte(k.Key))
			hashes[i], keys[i] = sum[:], &k.Key
		}
	}
	return names, hashes, keys, missing, firstMissing
}

// errVanished is the claim a duplicate saw being deleted (by retention)
// before its status could be read.
var errVanished = errors.New("the claim was deleted while it was being read; try again")

// Claim records ev and fans it out to routes (the names of the routes its
// type matches), all in one transaction: the claim row, one delivery row
// and one job per route. A route whose business key (ev.BusinessKeys) is
// held by another claim gets a skipped delivery and no job; one whose key is
// missing gets a failed delivery and no job. Only the call that inserts the
// claim does this; any other call for the same key is a Duplicate, except
// that with reopen a failed claim has its failed deliveries reopened (see
// Reopen). Nothing is committed when an error is returned. An event holding
// text the tables cannot store fails with ErrUnstorable, before any statement.
//
// A duplicate whose claim is deleted by retention between the insert that
// saw it and the read of its status is claimed anew, in a new transaction:
// retention deleted it, so this is the redelivery after retention.
func (s *Store) Claim(ctx context.Context, ev Event, routes []string, reopen bool) (Result, error) {
	if err := storable(ev, routes); err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	var res Result
	names, hashes, keys, missing, firstMissing := claimArgs(ev, routes)
	claimOnce := func(tx *Store) error {
		res = Result{}
		status := Processing
		if len(routes) == 0 {
			status = Ignored
		}
		var hash []byte // the replay guard's key; nil (NULL) leaves it out
		if ev.GuardBody {
			sum := sha256.Sum256(ev.Payload)
			hash = sum[:]
		}
		var won int
		var skipped []string
		var skipReason *string
		var unnamed bool
		if err := tx.db.QueryRow(ctx, claimSQL, ev.Provider, ev.ID, ev.Type, ev.ObjectID, status,
			ev.Payload, ev.ContentType, names, hashes, keys, missing, firstMissing, hash, ev.ContentEncoding).Scan(&won, &skipped, &skipReason, &unnamed); err != nil {
			return fmt.Errorf("inserting claim: %w", err)
		}
		if unnamed {
			rows, err := tx.db.Query(ctx, holderSQL, ev.Provider, ev.ID, names, hashes)
			if err != nil {
				return fmt.Errorf("naming business keys' holders: %w", err)
			}
			named, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("naming business keys' holders: %w", err)
			}
			if skipReason == nil && len(named) > 0 {
				skipReason = &slices.Sorted(slices.Values(named))[0]
			}
		}
		if won == 1 {
			return tx.fanOut(ctx, ev, names, missing, skipped, skipReason, status, &res)
		}
		res.Decision = Duplicate
		if reopen {
			n, err := tx.reopenTx(ctx, ev.Provider, ev.ID, false, ev.JobMetadata)
			var conflict *statusConflict
			switch {
			case err == nil:
				res = Result{Decision: Reopened, Status: Processing, Deliveries: n}
				return nil
			case errors.As(err, &conflict):
				// The status reopenTx read is the duplicate's answer.
				res.Status = conflict.status
				return nil
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		err := tx.db.QueryRow(ctx, `SELECT status FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`,
			ev.Provider, ev.ID).Scan(&res.Status)
		if errors.Is(err, pgx.ErrNoRows) && hash != nil {
			// No claim has this key: either the insert met the body's hash
			// (the same signed body under a new id), or the key's claim was
			// deleted by retention since the insert saw it.
			var replay bool
			if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_event_claims
WHERE provider = $1 AND body_hash = $2)`, ev.Provider, hash).Scan(&replay); err != nil {
				return fmt.Errorf("reading the claim of the body: %w", err)
			}
			if replay {
				res = Result{Decision: Replay}
				return nil
			}
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return errVanished
		}
		if err != nil {
			return fmt.Errorf("reading existing claim: %w", err)
		}
		return nil
	}
	err := s.inTx(ctx, claimOnce)
	for try := 1; errors.Is(err, errVanished) && try < 3; try++ {
		err = s.inTx(ctx, claimOnce)
	}
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	return res, nil
}

// fanOut finishes a won claim: it enqueues a job per delivery left
// processing and, when none is (every route was skipped or missing its
// business key), settles the claim's status in a second statement, the
// only case that needs one (see fanOutPlan).
func (s *Store) fanOut(ctx context.Context, ev Event, names []string, missing []*string,
	skipped []string, skipReason *string, status Status, res *Result) error {
	p := fanOutPlan(names, missing, skipped, status)
	*res = p.res
	if p.settle {
		if _, err := s.db.Exec(ctx, `UPDATE webhook_event_claims SET status = $3, last_error = coalesce(last_error, $4)
WHERE provider = $1 AND event_id = $2`, ev.Provider, ev.ID, p.res.Status, skipReason); err != nil {
			return fmt.Errorf("settling claim with no delivery to run: %w", err)
		}
	}
	return s.enqueue(ctx, ev.Provider, ev.ID, p.enqueue, ev.JobMetadata)
}

// plan is what finishing a won claim takes.
type plan struct {
	res     Result
	enqueue []string // the routes that get a job
	// settle: no delivery is left to run, so the claim's status must be
	// set to res.Status (ignored when all were skipped, else failed).
	settle bool
}

// fanOutPlan decides a won claim's result from its routes (names, sorted),
// their missing business keys and the routes skipped, given the status it
// was inserted with.
func fanOutPlan(names []string, missing []*string, skipped []string, status Status) plan {
	var p plan
	for i, r := range names {
		switch {
		case missing[i] != nil:
			p.res.Unkeyed = append(p.res.Unkeyed, r)
		case !slices.Contains(skipped, r):
			p.enqueue = append(p.enqueue, r)
		}
	}
	p.res.Decision, p.res.Deliveries, p.res.Skipped = Claimed, len(p.enqueue), skipped
	switch {
	case status == Ignored:
		p.res.Decision = ClaimedIgnored
	case len(p.enqueue) == 0:
		p.settle = true
		status = Ignored
		if len(p.res.Unkeyed) > 0 {
			status = Failed
		}
	}
	p.res.Status = status
	return p
}
