package claim

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
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
// fails all its requests at once.
//
// Events the batched statement does not cover run alone through
// Store.Claim: a duplicate that may reopen a failed claim, and any event
// carrying more than the fields the batched statement writes (see
// batchable).
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
	if !batchable(ev) {
		return g.store.Claim(ctx, ev, routes, reopen)
	}
	res, err := g.batch.Do(ctx, &groupCall{ev: ev, routes: routes})
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	if reopen && res.Decision == Duplicate && (res.Status == Failed || res.Status == "") {
		// The reopen path locks the claim and reads its deliveries: it runs
		// alone, in a transaction of its own.
		return g.store.Claim(ctx, ev, routes, reopen)
	}
	return res, nil
}

// Waiting returns how many events wait for a claim transaction to take them.
func (g *Group) Waiting() int { return g.batch.Waiting() }

// batchable reports whether ev carries only what claimManySQL writes. The
// whole struct is compared, so that a field added to Event for the
// single-event path (a guard, a key of its own) sends the events using it
// there until this statement learns the field, rather than being dropped.
func batchable(ev Event) bool {
	bare := Event{Provider: ev.Provider, ID: ev.ID, Type: ev.Type, ObjectID: ev.ObjectID,
		ContentType: ev.ContentType, Payload: ev.Payload, JobMetadata: ev.JobMetadata}
	return reflect.DeepEqual(ev, bare)
}

// claimManySQL is claimSQL for many events in one statement: it inserts the
// claims in key order (so that two batches sharing keys wait for each other
// instead of deadlocking) and, for each claim it inserted, the deliveries to
// its routes. It returns, per input row, whether it inserted the claim, and
// the status of a claim it found already committed.
const claimManySQL = `
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[])
        WITH ORDINALITY AS i(provider, event_id, event_type, object_id, status, payload, content_type, ord)
), claimed AS (
    INSERT INTO webhook_event_claims
        (provider, event_id, event_type, object_id, status, payload, content_type)
    SELECT provider, event_id, event_type, NULLIF(object_id, ''), status, payload, content_type
    FROM input
    ORDER BY provider, event_id
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status)
    SELECT claimed.provider, claimed.event_id, r.route, 'processing'
    FROM claimed
    JOIN input USING (provider, event_id)
    JOIN unnest($8::bigint[], $9::text[]) AS r(ord, route) ON r.ord = input.ord
)
SELECT input.ord, claimed.event_id IS NOT NULL, existing.status
FROM input
LEFT JOIN claimed USING (provider, event_id)
LEFT JOIN webhook_event_claims existing
    ON claimed.event_id IS NULL AND existing.provider = input.provider AND existing.event_id = input.event_id
ORDER BY input.ord`

// statusSQL reads the status of claims another transaction committed while
// claimManySQL waited for it: that statement's snapshot predates them.
const statusSQL = `
SELECT i.ord, c.status
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(provider, event_id, ord)
JOIN webhook_event_claims c ON c.provider = i.provider AND c.event_id = i.event_id`

// run claims a batch in one transaction: one statement for the claims and
// deliveries, one InsertManyTx for the jobs, one commit.
func (g *Group) run(ctx context.Context, calls []*groupCall) ([]Result, error) {
	// Copies of one key resolve here: the first is claimed (or found), the
	// others are its duplicates.
	type key struct{ provider, id string }
	first := map[key]int{}
	of := make([]int, len(calls)) // the index in rows of each call's key
	var rows []*groupCall
	for i, c := range calls {
		k := key{c.ev.Provider, c.ev.ID}
		j, ok := first[k]
		if !ok {
			j = len(rows)
			first[k] = j
			rows = append(rows, c)
		}
		of[i] = j
	}

	n := len(rows)
	providers, ids, types, objects, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, contentTypes := make([][]byte, n), make([]string, n)
	var routeOrd []int64
	var routeNames []string
	for j, c := range rows {
		providers[j], ids[j], types[j], objects[j] = c.ev.Provider, c.ev.ID, c.ev.Type, c.ev.ObjectID
		payloads[j], contentTypes[j] = c.ev.Payload, c.ev.ContentType
		statuses[j] = string(Processing)
		if len(c.routes) == 0 {
			statuses[j] = string(Ignored)
		}
		for _, r := range c.routes {
			routeOrd = append(routeOrd, int64(j+1))
			routeNames = append(routeNames, r)
		}
	}

	won := make([]bool, n)
	status := make([]Status, n)
	err := g.store.Transact(ctx, func(in *Store) error {
		tx := in.Tx()
		clear(won)
		clear(status)
		res, err := tx.Query(ctx, claimManySQL, providers, ids, types, objects, statuses, payloads, contentTypes,
			routeOrd, routeNames)
		if err != nil {
			return fmt.Errorf("inserting %d claims: %w", n, err)
		}
		var ord int64
		var w bool
		var st *string
		if _, err := pgx.ForEachRow(res, []any{&ord, &w, &st}, func() error {
			won[ord-1] = w
			if st != nil {
				status[ord-1] = Status(*st)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("inserting %d claims: %w", n, err)
		}

		var lateProviders, lateIDs []string
		var late []int
		var jobs []river.InsertManyParams
		for j, c := range rows {
			switch {
			case won[j]:
				status[j] = Status(statuses[j])
				for _, r := range c.routes {
					job := g.store.deliveryJob(c.ev.Provider, c.ev.ID, r)
					job.InsertOpts.Metadata = c.ev.JobMetadata
					jobs = append(jobs, job)
				}
			case status[j] == "":
				late = append(late, j)
				lateProviders, lateIDs = append(lateProviders, c.ev.Provider), append(lateIDs, c.ev.ID)
			}
		}
		if len(late) > 0 {
			res, err := tx.Query(ctx, statusSQL, lateProviders, lateIDs)
			if err != nil {
				return fmt.Errorf("reading %d existing claims: %w", len(late), err)
			}
			if _, err := pgx.ForEachRow(res, []any{&ord, &st}, func() error {
				status[late[ord-1]] = Status(*st)
				return nil
			}); err != nil {
				return fmt.Errorf("reading %d existing claims: %w", len(late), err)
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
	for i, c := range calls {
		j := of[i]
		switch {
		case won[j] && !seen[j]:
			results[i] = Result{Decision: Claimed, Status: status[j], Deliveries: len(c.routes)}
			if status[j] == Ignored {
				results[i].Decision = ClaimedIgnored
			}
		default:
			results[i] = Result{Decision: Duplicate, Status: status[j]}
		}
		seen[j] = true
	}
	return results, nil
}
