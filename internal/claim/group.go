package claim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/batch"
)

// groupMax caps how many claims share one transaction. Each carries its
// payload (up to ingest.max_body_bytes), which the statement copies once
// more while it is sent.
const groupMax = 64

// GroupOptions configure a Group.
type GroupOptions struct {
	// Timeout bounds each claim transaction, retries of a refused batch
	// included: ingest.claim_timeout. Zero means batch.DefaultTimeout.
	Timeout time.Duration
	// Concurrency is how many claim transactions run at once: while one
	// waits for its commit to reach the disk, the next executes. Their
	// claims go in key order, so two batches sharing keys wait for each
	// other rather than deadlock. Zero means 4.
	Concurrency int
	// Observe, if set, is told each batch's size.
	Observe func(n int)
}

// Group claims events with group commit: requests that arrive while a
// claim transaction runs share the next one (see batch.Combiner), so that
// sixty-four concurrent requests cost one commit rather than sixty-four. A
// lone request runs at once; nothing waits on a timer.
//
// The promises of Store.Claim hold for each event: its result is returned
// only after the commit that holds its claim, deliveries and jobs; copies
// of one key in one batch resolve to one claim and duplicates. A batch that
// the database refuses is split until the event at fault is alone, so that
// only its request fails; a batch that loses its connection or times out
// fails all its requests at once. An event holding text the tables cannot
// store (ErrUnstorable) is failed before the statement, at no cost to the
// others.
//
// Events the batched statement does not cover run alone through
// Store.Claim: a duplicate that may reopen a failed claim, and a duplicate
// whose claim retention deleted while the batch read it (Store.Claim then
// claims it anew). Everything else an Event carries (the replay guard, a
// Content-Encoding, business keys) is decided in the batch's statement.
type Group struct {
	store *Store
	batch batch.Combiner[*groupCall, Result]
}

type groupCall struct {
	ev     Event
	routes []string
}

// NewGroup returns a group over s.
func NewGroup(s *Store, o GroupOptions) *Group {
	g := &Group{store: s}
	g.batch = batch.Combiner[*groupCall, Result]{Max: groupMax, Concurrency: cmp.Or(o.Concurrency, 4),
		Timeout: o.Timeout, Run: g.run, Isolate: Refused, Observe: o.Observe}
	return g
}

// Claim is Store.Claim with group commit. It returns as soon as ctx ends,
// with an error; the claim may still commit with its batch, which a retry
// then finds as a duplicate.
func (g *Group) Claim(ctx context.Context, ev Event, routes []string, reopen bool) (Result, error) {
	res, err := g.batch.Do(ctx, &groupCall{ev: ev, routes: routes})
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	if res.Decision == Duplicate && (res.Status == "" || reopen && res.Status == Failed) {
		// The reopen path locks the claim and reads its deliveries, and a
		// claim deleted under the batch is claimed anew: both run alone, in
		// a transaction of their own.
		return g.store.Claim(ctx, ev, routes, reopen)
	}
	return res, nil
}

// Waiting returns how many events wait for a claim transaction to take them.
func (g *Group) Waiting() int { return g.batch.Waiting() }

// claimManySQL is claimSQL for many events in one statement. It inserts the
// claims in key order and their business keys in (route, key hash) order,
// so that two batches sharing keys wait for each other instead of
// deadlocking, and, for each claim it inserted, the deliveries to its
// routes. As in claimSQL, the claims' conflict clause names no target, so
// the replay guard's key on (provider, body_hash) is caught as the primary
// key is, and a business key that is not returned is held by another claim:
// one of this batch (named from bkeys) or one committed before the
// statement began (named from the table).
//
// It returns, per input row: whether it inserted the claim; the status of
// a claim of the key it found already committed; whether the row is a
// replay (its key is new but its body's hash is held, by a claim of this
// batch or a committed one); and for a won claim the routes it skipped, the
// first skip reason, and whether a holder is still to be named (one that
// committed while the statement waited on its key).
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
    SELECT claimed.provider, claimed.event_id, r.route, r.key_hash, r.business_key, r.missing
    FROM claimed
    JOIN input USING (provider, event_id)
    JOIN unnest($11::bigint[], $12::text[], $13::bytea[], $14::text[], $15::text[])
        AS r(ord, route, key_hash, business_key, missing) ON r.ord = input.ord
), bkeys AS (
    INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
    SELECT route, key_hash, business_key, provider, event_id
    FROM routes
    WHERE key_hash IS NOT NULL
    ORDER BY route, key_hash -- one order across batches, so concurrent ones never deadlock
    ON CONFLICT (route, key_hash) DO NOTHING
    RETURNING route, key_hash, provider, event_id
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status, last_error, business_key_missing)
    SELECT r.provider, r.event_id, r.route,
           CASE WHEN r.missing IS NOT NULL THEN 'failed'
                WHEN lost THEN 'skipped'
                ELSE 'processing' END,
           CASE WHEN r.missing IS NOT NULL THEN r.missing
                WHEN lost THEN 'business key is held by ' || coalesce(won.provider, held.provider) || '/'
                    || coalesce(won.event_id, held.event_id) END,
           r.missing IS NOT NULL
    FROM routes r
    -- The key's holder if this batch inserted it: this claim or another.
    LEFT JOIN bkeys won ON won.route = r.route AND won.key_hash = r.key_hash
    CROSS JOIN LATERAL (SELECT r.key_hash IS NOT NULL
        AND (won.provider IS DISTINCT FROM r.provider OR won.event_id IS DISTINCT FROM r.event_id) AS lost) l
    -- The statement's snapshot: holders committed before it began.
    LEFT JOIN webhook_business_keys held
        ON r.key_hash IS NOT NULL AND won.route IS NULL AND held.route = r.route AND held.key_hash = r.key_hash
    RETURNING provider, event_id, route, status, last_error
), skips AS (
    SELECT provider, event_id, array_agg(route ORDER BY route) AS routes, min(last_error) AS reason,
           count(*) FILTER (WHERE last_error IS NULL) > 0 AS unnamed
    FROM deliveries
    WHERE status = 'skipped'
    GROUP BY provider, event_id
)
SELECT input.ord, claimed.event_id IS NOT NULL, existing.status,
       claimed.event_id IS NULL AND existing.status IS NULL AND input.body_hash IS NOT NULL AND (
           EXISTS (SELECT 1 FROM claimed c WHERE c.provider = input.provider AND c.body_hash = input.body_hash)
        OR EXISTS (SELECT 1 FROM webhook_event_claims c
                   WHERE c.provider = input.provider AND c.body_hash = input.body_hash)),
       skips.routes, skips.reason, coalesce(skips.unnamed, false)
FROM input
LEFT JOIN claimed ON claimed.provider = input.provider AND claimed.event_id = input.event_id
LEFT JOIN webhook_event_claims existing
    ON claimed.event_id IS NULL AND existing.provider = input.provider AND existing.event_id = input.event_id
LEFT JOIN skips ON skips.provider = input.provider AND skips.event_id = input.event_id
ORDER BY input.ord`

// lateSQL reads what claimManySQL could not see of keys another
// transaction committed while it waited for them (its snapshot predates
// them): the key's claim status, else whether the body's hash is held (a
// replay). A row with neither had its claim deleted meanwhile.
const lateSQL = `
SELECT i.ord, c.status,
       i.body_hash IS NOT NULL AND EXISTS (SELECT 1 FROM webhook_event_claims h
           WHERE h.provider = i.provider AND h.body_hash = i.body_hash)
FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS i(provider, event_id, body_hash, ord)
LEFT JOIN webhook_event_claims c ON c.provider = i.provider AND c.event_id = i.event_id`

// holdersSQL is holderSQL for many claims: it names the business keys'
// holders claimManySQL could not see, now that they have committed.
const holdersSQL = `
UPDATE webhook_deliveries d
SET last_error = 'business key is held by ' || k.provider || '/' || k.event_id
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[]) AS r(ord, provider, event_id, route, key_hash)
JOIN webhook_business_keys k ON k.route = r.route AND k.key_hash = r.key_hash
WHERE d.provider = r.provider AND d.event_id = r.event_id AND d.route = r.route
  AND d.status = 'skipped' AND d.last_error IS NULL
RETURNING r.ord, d.last_error`

// settleSQL sets the status of won claims left with no delivery to run.
const settleSQL = `
UPDATE webhook_event_claims c SET status = s.status, last_error = coalesce(c.last_error, s.reason)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS s(provider, event_id, status, reason)
WHERE c.provider = s.provider AND c.event_id = s.event_id`

// groupRow is one key of a batch: the first call carrying it, its
// statement arguments and what the transaction decided.
type groupRow struct {
	c *groupCall
	// Per route, sorted by name (claimArgs).
	names        []string
	hashes       [][]byte
	keys         []*string
	missing      []*string
	firstMissing *string
	bodyHash     []byte

	won        bool
	replay     bool
	status     Status
	skipped    []string
	skipReason *string
	unnamed    bool
	res        Result // a won claim's result
}

// run claims a batch in one transaction: one statement for the claims,
// business keys and deliveries, one InsertManyTx for the jobs, one commit.
// A statement more runs only for what that one could not see or write: the
// keys and holders other transactions committed while it waited on them,
// and the status of claims left with no delivery to run.
func (g *Group) run(ctx context.Context, calls []*groupCall) ([]Result, error) {
	// An event the tables cannot hold is failed before any statement: the
	// others run again at once as a batch, so it costs them no round trip,
	// where a statement the database refused would be split and rerun.
	faults := batch.Faults{}
	for i, c := range calls {
		if err := storable(c.ev, c.routes); err != nil {
			faults[i] = err
		}
	}
	if len(faults) > 0 {
		return nil, faults
	}
	// Copies of one key resolve here: the first is claimed (or found), the
	// others are its duplicates.
	type key struct{ provider, id string }
	first := map[key]int{}
	of := make([]int, len(calls)) // the index in rows of each call's key
	var rows []*groupRow
	for i, c := range calls {
		k := key{c.ev.Provider, c.ev.ID}
		j, ok := first[k]
		if !ok {
			j = len(rows)
			first[k] = j
			r := &groupRow{c: c}
			r.names, r.hashes, r.keys, r.missing, r.firstMissing = claimArgs(c.ev, c.routes)
			if c.ev.GuardBody {
				sum := sha256.Sum256(c.ev.Payload)
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
	for j, r := range rows {
		ev := r.c.ev
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
		}
	}

	err := g.store.Transact(ctx, func(in *Store) error {
		tx := in.Tx()
		for _, r := range rows {
			r.won, r.replay, r.status, r.skipped, r.skipReason, r.unnamed, r.res = false, false, "", nil, nil, false, Result{}
		}
		res, err := tx.Query(ctx, claimManySQL, providers, ids, types, objects, statuses, payloads, contentTypes,
			lastErrors, bodyHashes, encodings, routeOrd, routeNames, routeHashes, routeKeys, routeMissing)
		if err != nil {
			return fmt.Errorf("inserting %d claims: %w", n, err)
		}
		var ord int64
		var won, replay, unnamed bool
		var st, reason *string
		var skipped []string
		if _, err := pgx.ForEachRow(res, []any{&ord, &won, &st, &replay, &skipped, &reason, &unnamed}, func() error {
			r := rows[ord-1]
			r.won, r.replay, r.skipped, r.skipReason, r.unnamed = won, replay, skipped, reason, unnamed
			if st != nil {
				r.status = Status(*st)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("inserting %d claims: %w", n, err)
		}
		if err := g.late(ctx, tx, rows); err != nil {
			return err
		}
		if err := g.nameHolders(ctx, tx, rows); err != nil {
			return err
		}

		var settleKeys [3][]string // provider, event id, status
		var settleReasons []*string
		var jobs []river.InsertManyParams
		for j, r := range rows {
			if !r.won {
				continue
			}
			p := fanOutPlan(r.names, r.missing, r.skipped, Status(statuses[j]))
			if p.settle {
				for i, v := range []string{r.c.ev.Provider, r.c.ev.ID, string(p.res.Status)} {
					settleKeys[i] = append(settleKeys[i], v)
				}
				settleReasons = append(settleReasons, r.skipReason)
			}
			r.res = p.res
			for _, route := range p.enqueue {
				job := g.store.deliveryJob(r.c.ev.Provider, r.c.ev.ID, route)
				job.InsertOpts.Metadata = r.c.ev.JobMetadata
				jobs = append(jobs, job)
			}
		}
		if len(settleReasons) > 0 {
			if _, err := tx.Exec(ctx, settleSQL, settleKeys[0], settleKeys[1], settleKeys[2], settleReasons); err != nil {
				return fmt.Errorf("settling %d claims with no delivery to run: %w", len(settleReasons), err)
			}
		}
		if len(jobs) > 0 {
			if _, err := g.store.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("enqueueing %d delivery jobs: %w", len(jobs), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	results := make([]Result, len(calls))
	seen := make([]bool, n)
	for i := range calls {
		r := rows[of[i]]
		switch {
		case r.won && !seen[of[i]]:
			results[i] = r.res
		case r.replay:
			results[i] = Result{Decision: Replay}
		case r.won:
			results[i] = Result{Decision: Duplicate, Status: r.res.Status}
		default:
			// An empty status is a claim deleted under the batch: Claim
			// claims it anew, alone.
			results[i] = Result{Decision: Duplicate, Status: r.status}
		}
		seen[of[i]] = true
	}
	return results, nil
}

// late reads, for the rows that lost their insert to a claim claimManySQL
// could not see, that claim's status or that the body's hash is held.
func (g *Group) late(ctx context.Context, tx pgx.Tx, rows []*groupRow) error {
	var providers, ids []string
	var hashes [][]byte
	var late []*groupRow
	for _, r := range rows {
		if !r.won && !r.replay && r.status == "" {
			late = append(late, r)
			providers, ids, hashes = append(providers, r.c.ev.Provider), append(ids, r.c.ev.ID), append(hashes, r.bodyHash)
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
func (g *Group) nameHolders(ctx context.Context, tx pgx.Tx, rows []*groupRow) error {
	var ords []int64
	var providers, ids, routes []string
	var hashes [][]byte
	for j, r := range rows {
		if !r.won || !r.unnamed {
			continue
		}
		for i, name := range r.names {
			if r.hashes[i] != nil {
				ords = append(ords, int64(j))
				providers, ids = append(providers, r.c.ev.Provider), append(ids, r.c.ev.ID)
				routes, hashes = append(routes, name), append(hashes, r.hashes[i])
			}
		}
	}
	if len(ords) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, holdersSQL, ords, providers, ids, routes, hashes)
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
