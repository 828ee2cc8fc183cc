package claim

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
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
	// After holds, for each route it matches that runs after others, the
	// names of those routes (its predecessors): the route's delivery waits
	// until theirs have completed. Predecessors the event does not match
	// are not waited for; routes without any are absent.
	After map[string][]string
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

// Request is one event to claim: the event and the names of the routes its
// type matches.
type Request struct {
	Event  Event
	Routes []string
}

// Claim records ev and fans it out to routes (the names of the routes its
// type matches): a batch of one (see ClaimMany), all in one transaction: the
// claim row, one delivery row and one job per route. A route whose business
// key (ev.BusinessKeys) is held by another claim gets a skipped delivery and
// no job; one whose key is missing gets a failed delivery and no job. Only
// the call that inserts the claim does this; any other call for the same key
// is a Duplicate, except that with reopen a failed claim has its failed
// deliveries reopened (see Reopen). Nothing is committed when an error is
// returned. An event holding text the tables cannot store fails with
// ErrUnstorable, before any statement.
//
// A duplicate whose claim is deleted by retention between the insert that
// saw it and the read of its status is claimed anew, in a new transaction:
// retention deleted it, so this is the redelivery after retention.
func (s *Store) Claim(ctx context.Context, ev Event, routes []string, reopen bool) (Result, error) {
	if err := Storable(ev, routes); err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	req := Request{Event: ev, Routes: routes}
	res, err := s.ClaimMany(ctx, []Request{req})
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	return s.Resolve(ctx, req, reopen, res[0])
}

// Resolve finishes, alone, what ClaimMany left to a single event in res:
// with reopen, it reopens the failed claim of a duplicate (in a transaction
// of its own, which locks the claim and reads its deliveries); it claims
// anew an event whose claim was deleted while the batch read it. Any other
// result is returned as it is.
func (s *Store) Resolve(ctx context.Context, req Request, reopen bool, res Result) (Result, error) {
	ev := req.Event
	for try := 0; ; try++ {
		switch {
		case res.Decision != Duplicate:
			return res, nil
		case reopen && res.Status == Failed:
			var n int
			err := s.inTx(ctx, func(tx *Store) (err error) {
				n, err = tx.reopenTx(ctx, ev.Provider, ev.ID, false, ev.JobMetadata)
				return err
			})
			var conflict *statusConflict
			switch {
			case err == nil:
				return Result{Decision: Reopened, Status: Processing, Deliveries: n}, nil
			case errors.As(err, &conflict):
				// The status reopenTx read is the duplicate's answer.
				return Result{Decision: Duplicate, Status: conflict.status}, nil
			case !errors.Is(err, ErrNotFound):
				return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
			}
			// Deleted by retention since the batch saw it: claimed anew.
		case res.Status != "":
			return res, nil
		}
		if try == 2 {
			return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, errVanished)
		}
		again, err := s.ClaimMany(ctx, []Request{req})
		if err != nil {
			return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
		}
		res = again[0]
	}
}

// claimArgs are claimManySQL's per-route arguments for ev and routes, and the
// message of the first route whose business key is missing (the claim's
// last_error), with routes ordered by name so that concurrent claims take
// their keys' locks in one order. waits[i] is the JSON array of the
// predecessors routes[i] waits for, ancestors[i] that of all the routes it
// runs after, directly or not (a predecessor skipped anywhere up the chain
// skips it too); both only among routes, "[]" for none.
func claimArgs(ev Event, routes []string) (names []string, hashes [][]byte, keys, missing []*string, firstMissing *string,
	waits, ancestors []string,
) {
	byRoute := make(map[string]BusinessKey, len(ev.BusinessKeys))
	for _, k := range ev.BusinessKeys {
		byRoute[k.Route] = k
	}
	names = slices.Sorted(slices.Values(routes))
	hashes, keys, missing = make([][]byte, len(names)), make([]*string, len(names)), make([]*string, len(names))
	waits, ancestors = make([]string, len(names)), make([]string, len(names))
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
		w, a := chain(ev.After, names, r)
		waits[i], ancestors[i] = jsonList(w), jsonList(a)
	}
	return names, hashes, keys, missing, firstMissing, waits, ancestors
}

// chain returns the predecessors of route in after that are among names
// (sorted), and all its ancestors among them, each once. A cycle (which the
// configuration refuses) ends the walk rather than looping.
func chain(after map[string][]string, names []string, route string) (preds, ancestors []string) {
	among := func(r string) bool { _, ok := slices.BinarySearch(names, r); return ok }
	for _, p := range after[route] {
		if among(p) && !slices.Contains(preds, p) {
			preds = append(preds, p)
		}
	}
	seen := map[string]bool{route: true}
	queue := slices.Clone(preds)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		ancestors = append(ancestors, p)
		for _, q := range after[p] {
			if among(q) && !seen[q] {
				queue = append(queue, q)
			}
		}
	}
	slices.Sort(preds)
	slices.Sort(ancestors)
	return preds, ancestors
}

// jsonList encodes names as a JSON array of strings.
func jsonList(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(names) // strings always encode
	return string(b)
}

// errVanished is the claim a duplicate saw being deleted (by retention)
// before its status could be read.
var errVanished = errors.New("the claim was deleted while it was being read; try again")

// claimManySQL is the claim statement: it claims many events (or one) in one
// round trip. It inserts the claims in key order and their business keys in
// (route, key hash) order, so that two batches sharing keys wait for each
// other instead of deadlocking, and, for each claim it inserted, the
// deliveries to its routes. ON CONFLICT DO NOTHING makes the unique keys the
// arbiter: a concurrent insert of the same key waits for the winner's
// transaction and then does nothing. The claims' conflict clause names no
// target, so it catches either unique key, the primary key (provider,
// event_id) or the replay guard's partial one on (provider, body_hash) (the
// body's hash is NULL when the guard is off). A business key that is not
// returned is held by another claim: one of this batch (named from bkeys) or
// one committed before the statement began (named from the table). A route
// whose key could not be computed gets a failed delivery.
//
// It returns one claimedRow per input row.
const claimManySQL = `
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[],
                $8::text[], $9::bytea[], $10::text[])
        WITH ORDINALITY AS i(provider, event_id, event_type, object_id, status, payload, content_type,
                             last_error, body_hash, content_encoding, ord)
), claimed AS (
    INSERT INTO webhook_event_claims
        (provider, event_id, event_type, object_id, status, payload, content_type, last_error,
         body_hash, content_encoding)
    SELECT provider, event_id, event_type, NULLIF(object_id, ''), status, payload, content_type, last_error,
           body_hash, content_encoding
    FROM input
    ORDER BY provider, event_id
    ON CONFLICT DO NOTHING -- either key: (provider, event_id) or (provider, body_hash)
    RETURNING provider, event_id, body_hash
), routes AS (
    SELECT claimed.provider, claimed.event_id, r.route, r.key_hash, r.business_key, r.missing,
           ARRAY(SELECT jsonb_array_elements_text(r.waits::jsonb)) AS waits,
           ARRAY(SELECT jsonb_array_elements_text(r.ancestors::jsonb)) AS ancestors
    FROM claimed
    JOIN input USING (provider, event_id)
    JOIN unnest($11::bigint[], $12::text[], $13::bytea[], $14::text[], $15::text[], $16::text[], $17::text[])
        AS r(ord, route, key_hash, business_key, missing, waits, ancestors) ON r.ord = input.ord
), bkeys AS (
    INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
    SELECT route, key_hash, business_key, provider, event_id
    FROM routes
    WHERE key_hash IS NOT NULL
    ORDER BY route, key_hash -- one order across batches, so concurrent ones never deadlock
    ON CONFLICT (route, key_hash) DO NOTHING
    RETURNING route, key_hash, provider, event_id
), decided AS (
    -- Per route: whether another claim holds its key, and which (NULL
    -- when it committed while the statement waited on the key).
    SELECT r.*, l.lost,
           CASE WHEN l.lost THEN coalesce(won.provider, held.provider) || '/' || coalesce(won.event_id, held.event_id) END AS holder
    FROM routes r
    -- The key's holder if this batch inserted it: this claim or another.
    LEFT JOIN bkeys won ON won.route = r.route AND won.key_hash = r.key_hash
    CROSS JOIN LATERAL (SELECT r.key_hash IS NOT NULL
        AND (won.provider IS DISTINCT FROM r.provider OR won.event_id IS DISTINCT FROM r.event_id) AS lost) l
    -- The statement's snapshot: holders committed before it began. One
    -- primary-key probe per route (see existing below).
    LEFT JOIN LATERAL (
        SELECT h.provider, h.event_id FROM webhook_business_keys h
        WHERE r.key_hash IS NOT NULL AND won.route IS NULL AND h.route = r.route AND h.key_hash = r.key_hash
        LIMIT 1) held ON true
), deliveries AS (
    -- A route that runs after others waits for them, with no job; one after
    -- a route skipped by its business key (anywhere up the chain) is
    -- skipped too, naming the same holder.
    INSERT INTO webhook_deliveries (provider, event_id, route, status, last_error, business_key_missing, waits_for)
    SELECT d.provider, d.event_id, d.route,
           CASE WHEN d.missing IS NOT NULL THEN 'failed'
                WHEN d.lost OR up.lost THEN 'skipped'
                WHEN cardinality(d.waits) > 0 THEN 'waiting'
                ELSE 'processing' END,
           CASE WHEN d.missing IS NOT NULL THEN d.missing
                WHEN d.lost THEN 'business key is held by ' || d.holder
                WHEN up.lost THEN 'business key is held by ' || up.holder END,
           d.missing IS NOT NULL,
           d.waits
    FROM decided d
    LEFT JOIN LATERAL (
        SELECT true AS lost, min(a.holder) AS holder
        FROM decided a
        WHERE a.provider = d.provider AND a.event_id = d.event_id AND a.lost AND a.route = ANY(d.ancestors)
        HAVING count(*) > 0) up ON true
    RETURNING provider, event_id, route, status, last_error
), skips AS (
    SELECT provider, event_id, array_agg(route ORDER BY route) AS routes, min(last_error) AS reason,
           count(*) FILTER (WHERE last_error IS NULL) > 0 AS unnamed
    FROM deliveries
    WHERE status = 'skipped'
    GROUP BY provider, event_id
)
SELECT input.ord, claimed.event_id IS NOT NULL AS won, existing.status AS existing,
       claimed.event_id IS NULL AND existing.status IS NULL AND input.body_hash IS NOT NULL AND (
           EXISTS (SELECT 1 FROM claimed c WHERE c.provider = input.provider AND c.body_hash = input.body_hash)
        -- OFFSET 0: a probe of the replay guard's index per row, never a
        -- hash of the whole table's body hashes (see existing below).
        OR EXISTS (SELECT 1 FROM webhook_event_claims c
                   WHERE c.provider = input.provider AND c.body_hash = input.body_hash OFFSET 0)) AS replay,
       skips.routes AS skipped, skips.reason AS skip_reason, coalesce(skips.unnamed, false) AS unnamed
FROM input
LEFT JOIN claimed ON claimed.provider = input.provider AND claimed.event_id = input.event_id
-- One primary-key probe per input row that lost its insert. As a plain
-- join it was planned as a hash join over a sequential scan of the whole
-- claim table when the plan was made while the table was small: ingest's
-- statement is prepared, and Postgres keeps that generic plan as the table
-- grows, until autovacuum analyzes it (a new install, a burst). Each batch
-- then read every claim, and ingest slowed as the table grew (from 1,262
-- to 460 requests/s over 20,000 events in BenchmarkIngestTracing). The
-- LIMIT keeps Postgres from flattening the lookup into a join
-- (TestClaimFollowsPrimaryKeysWhenStatisticsLag).
LEFT JOIN LATERAL (
    SELECT e.status FROM webhook_event_claims e
    WHERE claimed.event_id IS NULL AND e.provider = input.provider AND e.event_id = input.event_id
    LIMIT 1) existing ON true
LEFT JOIN skips ON skips.provider = input.provider AND skips.event_id = input.event_id
ORDER BY input.ord`

// claimedRow is what claimManySQL says of one input row.
type claimedRow struct {
	// Ord is the input row's number, from 1.
	Ord int64 `db:"ord"`
	// Won: the statement inserted the claim.
	Won bool `db:"won"`
	// Existing is the status of a claim of the key it found already
	// committed; nil when it won, or when the key's claim committed while
	// the statement waited on it (see lateSQL).
	Existing *string `db:"existing"`
	// Replay: the key is new but the body's hash is held, by a claim of
	// this batch or a committed one.
	Replay bool `db:"replay"`
	// For a won claim: the routes it skipped, the first skip reason, and
	// whether a holder is still to be named (one that committed while the
	// statement waited on its key; see holdersSQL).
	Skipped    []string `db:"skipped"`
	SkipReason *string  `db:"skip_reason"`
	Unnamed    bool     `db:"unnamed"`
}

// lateSQL reads what claimManySQL could not see of keys another
// transaction committed while it waited for them (its snapshot predates
// them): the key's claim status, else whether the body's hash is held (a
// replay). A row with neither had its claim deleted meanwhile.
const lateSQL = `
SELECT i.ord, c.status,
       i.body_hash IS NOT NULL AND EXISTS (SELECT 1 FROM webhook_event_claims h
           WHERE h.provider = i.provider AND h.body_hash = i.body_hash OFFSET 0)
FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS i(provider, event_id, body_hash, ord)
LEFT JOIN LATERAL (
    SELECT c.status FROM webhook_event_claims c
    WHERE c.provider = i.provider AND c.event_id = i.event_id
    LIMIT 1) c ON true`

// holdersSQL names the business keys' holders claimManySQL could not see,
// now that they have committed: it runs only when a claim lost a key to a
// concurrent one. A delivery skipped because a route it runs after was
// skipped names that route's holder (key_route).
const holdersSQL = `
UPDATE webhook_deliveries d
SET last_error = 'business key is held by ' || k.provider || '/' || k.event_id
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[])
    AS r(ord, provider, event_id, route, key_hash, key_route)
JOIN webhook_business_keys k ON k.route = r.key_route AND k.key_hash = r.key_hash
WHERE d.provider = r.provider AND d.event_id = r.event_id AND d.route = r.route
  AND d.status = 'skipped' AND d.last_error IS NULL
RETURNING r.ord, d.last_error`

// settleSQL sets the status of won claims left with no delivery to run.
const settleSQL = `
UPDATE webhook_event_claims c SET status = s.status, last_error = coalesce(c.last_error, s.reason)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS s(provider, event_id, status, reason)
WHERE c.provider = s.provider AND c.event_id = s.event_id`

// claimRow is one key of a batch: the first request carrying it, its
// statement arguments and what the transaction decided.
type claimRow struct {
	req Request
	// Per route, sorted by name (claimArgs).
	names        []string
	hashes       [][]byte
	keys         []*string
	missing      []*string
	firstMissing *string
	waits        []string // JSON arrays
	ancestors    []string
	bodyHash     []byte

	won        bool
	replay     bool
	status     Status
	skipped    []string
	skipReason *string
	unnamed    bool
	res        Result // a won claim's result
}

// ClaimMany claims reqs in one transaction: one statement for the claims,
// business keys and deliveries, one InsertManyFastTx (COPY) for the jobs, one commit.
// A statement more runs only for what that one could not see or write: the
// keys and holders other transactions committed while it waited on them,
// and the status of claims left with no delivery to run. results[i] is
// reqs[i]'s; copies of one key resolve to one claim and its duplicates.
//
// Two outcomes are left to Resolve, which handles them alone: a duplicate
// of a failed claim that may be reopened (Status Failed), and a duplicate
// whose claim was deleted (by retention) while the statement read it
// (Status ""). Nothing is committed when an error is returned; an event
// holding text the tables cannot store (ErrUnstorable, see Storable) fails
// the call before any statement.
func (s *Store) ClaimMany(ctx context.Context, reqs []Request) ([]Result, error) {
	for _, req := range reqs {
		if err := Storable(req.Event, req.Routes); err != nil {
			return nil, fmt.Errorf("claiming event %s/%s: %w", req.Event.Provider, req.Event.ID, err)
		}
	}
	// Copies of one key resolve here: the first is claimed (or found), the
	// others are its duplicates.
	type key struct{ provider, id string }
	first := map[key]int{}
	of := make([]int, len(reqs)) // the index in rows of each request's key
	var rows []*claimRow
	for i, req := range reqs {
		k := key{req.Event.Provider, req.Event.ID}
		j, ok := first[k]
		if !ok {
			j = len(rows)
			first[k] = j
			r := &claimRow{req: req}
			r.names, r.hashes, r.keys, r.missing, r.firstMissing, r.waits, r.ancestors = claimArgs(req.Event, req.Routes)
			if req.Event.GuardBody {
				sum := sha256.Sum256(req.Event.Payload)
				r.bodyHash = sum[:]
			}
			rows = append(rows, r)
		}
		of[i] = j
	}

	n := len(rows)
	providers, ids, types, objects, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, contentTypes, lastErrors := make([][]byte, n), make([]string, n), make([]*string, n)
	bodyHashes, encodings := make([][]byte, n), make([]string, n)
	var routeOrd []int64
	var routeNames []string
	var routeHashes [][]byte
	var routeKeys, routeMissing []*string
	var routeWaits, routeAncestors []string
	for j, r := range rows {
		ev := r.req.Event
		providers[j], ids[j], types[j], objects[j] = ev.Provider, ev.ID, ev.Type, ev.ObjectID
		payloads[j], contentTypes[j], lastErrors[j] = ev.Payload, ev.ContentType, r.firstMissing
		bodyHashes[j], encodings[j] = r.bodyHash, ev.ContentEncoding
		statuses[j] = string(Processing)
		if len(r.names) == 0 {
			statuses[j] = string(Ignored)
		}
		for i, name := range r.names {
			routeOrd = append(routeOrd, int64(j+1))
			routeNames = append(routeNames, name)
			routeHashes = append(routeHashes, r.hashes[i])
			routeKeys = append(routeKeys, r.keys[i])
			routeMissing = append(routeMissing, r.missing[i])
			routeWaits = append(routeWaits, r.waits[i])
			routeAncestors = append(routeAncestors, r.ancestors[i])
		}
	}

	err := s.Transact(ctx, func(in *Store) error {
		tx := in.Tx()
		for _, r := range rows {
			r.won, r.replay, r.status, r.skipped, r.skipReason, r.unnamed, r.res = false, false, "", nil, nil, false, Result{}
		}
		// The claim statement on its generic plan (genericPlansSQL), and
		// the transaction's other statements as the session plans them.
		var b pgx.Batch
		queueGenericPlans(&b)
		var answers []claimedRow
		b.Queue(claimManySQL, providers, ids, types, objects, statuses, payloads, contentTypes,
			lastErrors, bodyHashes, encodings, routeOrd, routeNames, routeHashes, routeKeys, routeMissing,
			routeWaits, routeAncestors).Query(func(rows pgx.Rows) (err error) {
			answers, err = pgx.CollectRows(rows, pgx.RowToStructByName[claimedRow])
			return err
		})
		queueSessionPlans(&b)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("inserting %d claims: %w", n, err)
		}
		for _, a := range answers {
			r := rows[a.Ord-1]
			r.won, r.replay, r.skipped, r.skipReason, r.unnamed = a.Won, a.Replay, a.Skipped, a.SkipReason, a.Unnamed
			if a.Existing != nil {
				r.status = Status(*a.Existing)
			}
		}
		if err := late(ctx, tx, rows); err != nil {
			return err
		}
		if err := nameHolders(ctx, tx, rows); err != nil {
			return err
		}

		var settleKeys [3][]string // provider, event id, status
		var settleReasons []*string
		var jobs []river.InsertManyParams
		for j, r := range rows {
			if !r.won {
				continue
			}
			p := fanOutPlan(r.names, r.missing, r.skipped, r.waits, Status(statuses[j]))
			if p.settle {
				for i, v := range []string{r.req.Event.Provider, r.req.Event.ID, string(p.res.Status)} {
					settleKeys[i] = append(settleKeys[i], v)
				}
				settleReasons = append(settleReasons, r.skipReason)
			}
			r.res = p.res
			for _, route := range p.enqueue {
				job := s.deliveryJob(r.req.Event.Provider, r.req.Event.ID, route)
				job.InsertOpts.Metadata = r.req.Event.JobMetadata
				jobs = append(jobs, job)
			}
		}
		if len(settleReasons) > 0 {
			if _, err := tx.Exec(ctx, settleSQL, settleKeys[0], settleKeys[1], settleKeys[2], settleReasons); err != nil {
				return fmt.Errorf("settling %d claims with no delivery to run: %w", len(settleReasons), err)
			}
		}
		if len(jobs) > 0 {
			if _, err := s.jobs.InsertManyFastTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("enqueueing %d delivery jobs: %w", len(jobs), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	results := make([]Result, len(reqs))
	seen := make([]bool, n)
	for i := range reqs {
		r := rows[of[i]]
		switch {
		case r.won && !seen[of[i]]:
			results[i] = r.res
		case r.replay:
			results[i] = Result{Decision: Replay}
		case r.won:
			results[i] = Result{Decision: Duplicate, Status: r.res.Status}
		default:
			// An empty status is a claim deleted under the batch: Resolve
			// claims it anew, alone.
			results[i] = Result{Decision: Duplicate, Status: r.status}
		}
		seen[of[i]] = true
	}
	return results, nil
}

// late reads, for the rows that lost their insert to a claim claimManySQL
// could not see, that claim's status or that the body's hash is held.
func late(ctx context.Context, tx pgx.Tx, rows []*claimRow) error {
	var providers, ids []string
	var hashes [][]byte
	var late []*claimRow
	for _, r := range rows {
		if !r.won && !r.replay && r.status == "" {
			late = append(late, r)
			providers, ids, hashes = append(providers, r.req.Event.Provider), append(ids, r.req.Event.ID), append(hashes, r.bodyHash)
		}
	}
	if len(late) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, lateSQL, providers, ids, hashes)
	if err != nil {
		return fmt.Errorf("reading %d existing claims: %w", len(late), err)
	}
	var ord int64
	var st *string
	var replay bool
	if _, err := pgx.ForEachRow(res, []any{&ord, &st, &replay}, func() error {
		r := late[ord-1]
		switch {
		case st != nil:
			r.status = Status(*st)
		case replay:
			r.replay = true
		}
		return nil
	}); err != nil {
		return fmt.Errorf("reading %d existing claims: %w", len(late), err)
	}
	return nil
}

// nameHolders names the business keys' holders that committed while
// claimManySQL waited on their keys, and takes the first as the skip
// reason of a claim that had none.
func nameHolders(ctx context.Context, tx pgx.Tx, rows []*claimRow) error {
	var ords []int64
	var providers, ids, routes, keyRoutes []string
	var hashes [][]byte
	add := func(j int, r *claimRow, route, keyRoute string, hash []byte) {
		ords = append(ords, int64(j))
		providers, ids = append(providers, r.req.Event.Provider), append(ids, r.req.Event.ID)
		routes, keyRoutes, hashes = append(routes, route), append(keyRoutes, keyRoute), append(hashes, hash)
	}
	for j, r := range rows {
		if !r.won || !r.unnamed {
			continue
		}
		for i, name := range r.names {
			if r.hashes[i] == nil {
				continue
			}
			add(j, r, name, name, r.hashes[i])
			for d, dep := range r.names {
				var up []string
				_ = json.Unmarshal([]byte(r.ancestors[d]), &up) // claimArgs wrote it
				if slices.Contains(up, name) {
					add(j, r, dep, name, r.hashes[i])
				}
			}
		}
	}
	if len(ords) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, holdersSQL, ords, providers, ids, routes, hashes, keyRoutes)
	if err != nil {
		return fmt.Errorf("naming business keys' holders: %w", err)
	}
	var ord int64
	var named string
	first := map[int64]string{} // the first holder named, per row
	if _, err := pgx.ForEachRow(res, []any{&ord, &named}, func() error {
		if f, ok := first[ord]; !ok || named < f {
			first[ord] = named
		}
		return nil
	}); err != nil {
		return fmt.Errorf("naming business keys' holders: %w", err)
	}
	for ord, named := range first {
		if r := rows[ord]; r.skipReason == nil {
			r.skipReason = &named
		}
	}
	return nil
}

// plan is what finishing a won claim takes.
type plan struct {
	res     Result
	enqueue []string // the routes that get a job
	waiting []string // the routes that wait for others, with no job
	// settle: no delivery is left to run, so the claim's status must be
	// set to res.Status (ignored when all were skipped, else failed).
	settle bool
}

// fanOutPlan decides a won claim's result from its routes (names, sorted),
// their missing business keys, the routes skipped and what each waits for
// (claimArgs' JSON arrays; nil for none), given the status it was inserted
// with. A claim whose routes are all skipped, failed or waiting has none to
// run: waiting ones can be left only behind a failed one, so it is failed.
func fanOutPlan(names []string, missing []*string, skipped, waits []string, status Status) plan {
	var p plan
	for i, r := range names {
		switch {
		case missing[i] != nil:
			p.res.Unkeyed = append(p.res.Unkeyed, r)
		case slices.Contains(skipped, r):
		case waits != nil && waits[i] != "[]":
			p.waiting = append(p.waiting, r)
		default:
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
		if len(p.res.Unkeyed) > 0 || len(p.waiting) > 0 {
			status = Failed
		}
	}
	p.res.Status = status
	return p
}
