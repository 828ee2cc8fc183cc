package claim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/jackc/pgx/v5"
)

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
                $8::text[], $9::bytea[], $10::text[], $18::text[])
        WITH ORDINALITY AS i(provider, event_id, event_type, object_id, status, payload, content_type,
                             last_error, body_hash, content_encoding, source, ord)
), claimed AS (
    INSERT INTO webhook_event_claims
        (provider, event_id, event_type, object_id, status, payload, content_type, last_error,
         body_hash, content_encoding, source)
    SELECT provider, event_id, event_type, NULLIF(object_id, ''), status, payload, content_type, last_error,
           body_hash, content_encoding, source
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
	status0      Status // the status it is inserted with

	won        bool
	replay     bool
	status     Status
	skipped    []string
	skipReason *string
	unnamed    bool
	res        Result // a won claim's result
}

// ClaimMany claims reqs in one transaction: one statement for the claims,
// business keys and deliveries, one COPY for the jobs (insertJobs), one commit.
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
	rows, of := keyRows(reqs)
	args := claimManyArgs(rows)
	err := s.Transact(ctx, func(in *Store) error {
		tx := in.tx
		for _, r := range rows {
			r.won, r.replay, r.status, r.skipped, r.skipReason, r.unnamed, r.res = false, false, "", nil, nil, false, Result{}
		}
		if err := insertClaims(ctx, tx, rows, args); err != nil {
			return err
		}
		if err := late(ctx, tx, rows); err != nil {
			return err
		}
		if err := nameHolders(ctx, tx, rows); err != nil {
			return err
		}
		return s.fanOut(ctx, tx, rows)
	})
	if err != nil {
		return nil, err
	}
	return results(reqs, rows, of), nil
}

// keyRows resolves copies of one key: the first request carrying a key gets
// its row (with claimManySQL's per-route arguments), the others are its
// duplicates. of[i] is the index in rows of reqs[i]'s key.
func keyRows(reqs []Request) (rows []*claimRow, of []int) {
	type key struct{ provider, id string }
	first := map[key]int{}
	of = make([]int, len(reqs))
	for i, req := range reqs {
		k := key{req.Event.Provider, req.Event.ID}
		j, ok := first[k]
		if !ok {
			j = len(rows)
			first[k] = j
			r := &claimRow{req: req, status0: Processing}
			r.names, r.hashes, r.keys, r.missing, r.firstMissing, r.waits, r.ancestors = claimArgs(req.Event, req.Routes)
			if len(r.names) == 0 {
				r.status0 = Ignored
			}
			if req.Event.GuardBody {
				sum := sha256.Sum256(req.Event.Payload)
				r.bodyHash = sum[:]
			}
			rows = append(rows, r)
		}
		of[i] = j
	}
	return rows, of
}

// claimManyArgs returns claimManySQL's arguments for rows, in its parameters'
// order: one array element per claim ($1–$10), then one per route of each
// claim ($11–$17), the route's ord pointing at its claim, then the claims'
// sources ($18, added last so that the others kept their numbers).
func claimManyArgs(rows []*claimRow) []any {
	n := len(rows)
	providers, ids, types, objects, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, contentTypes, lastErrors := make([][]byte, n), make([]string, n), make([]*string, n)
	bodyHashes, encodings, sources := make([][]byte, n), make([]string, n), make([]string, n)
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
		sources[j] = cmp.Or(ev.Source, SourceWebhook)
		statuses[j] = string(r.status0)
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
	return []any{providers, ids, types, objects, statuses, payloads, contentTypes,
		lastErrors, bodyHashes, encodings, routeOrd, routeNames, routeHashes, routeKeys, routeMissing,
		routeWaits, routeAncestors, sources}
}

// insertClaims runs the claim statement on its generic plan
// (genericPlansSQL), and the transaction's other statements as the session
// plans them, in one round trip, and records in rows what it decided.
func insertClaims(ctx context.Context, tx pgx.Tx, rows []*claimRow, args []any) error {
	var b pgx.Batch
	queueGenericPlans(&b)
	var answers []claimedRow
	b.Queue(claimManySQL, args...).Query(func(rows pgx.Rows) (err error) {
		answers, err = pgx.CollectRows(rows, pgx.RowToStructByName[claimedRow])
		return err
	})
	queueSessionPlans(&b)
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("inserting %d claims: %w", len(rows), err)
	}
	for _, a := range answers {
		r := rows[a.Ord-1]
		r.won, r.replay, r.skipped, r.skipReason, r.unnamed = a.Won, a.Replay, a.Skipped, a.SkipReason, a.Unnamed
		if a.Existing != nil {
			r.status = Status(*a.Existing)
		}
	}
	return nil
}

// fanOut finishes the won claims of rows in tx: it settles those left with
// no delivery to run and inserts the jobs of the others' deliveries.
func (s *Store) fanOut(ctx context.Context, tx pgx.Tx, rows []*claimRow) error {
	var settleKeys [3][]string // provider, event id, status
	var settleReasons []*string
	var jobs []deliveryJob
	for _, r := range rows {
		if !r.won {
			continue
		}
		ev := r.req.Event
		p := fanOutPlan(r.names, r.missing, r.skipped, r.waits, r.status0)
		if p.settle {
			for i, v := range []string{ev.Provider, ev.ID, string(p.res.Status)} {
				settleKeys[i] = append(settleKeys[i], v)
			}
			settleReasons = append(settleReasons, r.skipReason)
		}
		r.res = p.res
		for _, route := range p.enqueue {
			jobs = append(jobs, deliveryJob{Key{ev.Provider, ev.ID, route}, ev.JobMetadata})
		}
	}
	if len(settleReasons) > 0 {
		if _, err := tx.Exec(ctx, settleSQL, settleKeys[0], settleKeys[1], settleKeys[2], settleReasons); err != nil {
			return fmt.Errorf("settling %d claims with no delivery to run: %w", len(settleReasons), err)
		}
	}
	return s.insertJobs(ctx, tx, jobs)
}

// results returns each request's Result from its key's row: the first copy
// of a won key gets the claim's result, later copies are its duplicates.
func results(reqs []Request, rows []*claimRow, of []int) []Result {
	out := make([]Result, len(reqs))
	seen := make([]bool, len(rows))
	for i := range reqs {
		r := rows[of[i]]
		switch {
		case r.won && !seen[of[i]]:
			out[i] = r.res
		case r.replay:
			out[i] = Result{Decision: Replay}
		case r.won:
			out[i] = Result{Decision: Duplicate, Status: r.res.Status}
		default:
			// An empty status is a claim deleted under the batch: Resolve
			// claims it anew, alone.
			out[i] = Result{Decision: Duplicate, Status: r.status}
		}
		seen[of[i]] = true
	}
	return out
}
