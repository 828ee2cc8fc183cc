package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Delivery is one (claim, route) pair with what the worker needs to attempt
// it: the claim's normalized fields and raw payload.
type Delivery struct {
	Provider     string
	EventID      string
	Route        string
	Status       DeliveryStatus
	AttemptCount int
	LastError    string
	UpdatedAt    time.Time
	CompletedAt  *time.Time
	// BusinessKeyMissing: the delivery failed at ingest because its route's
	// business key could not be computed; it is never reopened.
	BusinessKeyMissing bool
	// BusinessKey is the business key this delivery holds for its route
	// (the listed values as a JSON array), as Get reads it; empty when it
	// holds none.
	BusinessKey string
	// Result is the JSON the route's result program recorded when the
	// delivery completed; nil when there is none. Read by Get only.
	Result []byte
	// Attempts is the delivery's attempt history, without responses, as
	// Export reads it; nil elsewhere (see Store.Attempts).
	Attempts []AttemptRecord `db:"-"`
	// Results is a JSON object of the recorded results of the routes in
	// After, by route (those with none are absent); nil when there are
	// none. Read by LoadDeliveries only, for the route's $results.
	Results []byte
	// After names the routes whose deliveries of the claim must complete
	// before this one runs (recorded when the event was claimed); empty
	// for a delivery that waits for nothing.
	After []string

	// AttemptBase is how many Hookgate-Attempt numbers the delivery's
	// earlier jobs used: attempt n of its current job is number
	// AttemptBase + n.
	AttemptBase int

	EventType   string
	ObjectID    string
	ContentType string
	// ContentEncoding is the provider's Content-Encoding, "" for none.
	ContentEncoding string
	// Payload is nil once retention has cleared it.
	Payload []byte
	// ClaimFirstSeen is when ingest first accepted the event.
	ClaimFirstSeen time.Time
}

// Key returns the key of d.
func (d *Delivery) Key() Key { return Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route} }

// LoadDelivery returns the delivery k with its claim's payload.
func (s *Store) LoadDelivery(ctx context.Context, k Key) (Delivery, error) {
	ds, err := s.LoadDeliveries(ctx, []Key{k})
	if err != nil {
		return Delivery{}, err
	}
	if ds[0] == nil {
		return Delivery{}, fmt.Errorf("loading delivery %s: %w", k, ErrNotFound)
	}
	return *ds[0], nil
}

// deliveryColumns returns the columns of a Delivery, in its fields' order,
// over webhook_deliveries d joined to webhook_event_claims c; businessKey,
// result, results and payload are what to read as its BusinessKey, Result,
// Results and Payload.
func deliveryColumns(businessKey, result, results, payload string) string {
	return `d.provider, d.event_id, d.route, d.status, d.attempt_count, coalesce(d.last_error, ''),
    d.updated_at, d.completed_at, d.business_key_missing, ` + businessKey + `, ` + result + `, ` + results + `, d.waits_for, d.attempt_base,
    c.event_type, coalesce(c.object_id, ''), c.content_type, c.content_encoding, ` + payload + `, c.first_seen_at`
}

// predecessorResultsSQL is the results of the routes a delivery (aliased
// d) runs after, as a JSON object by route, each found by its primary key;
// NULL when none is recorded.
const predecessorResultsSQL = `(
    SELECT jsonb_object_agg(p.route, y.result)::text
    FROM unnest(d.waits_for) AS p(route)
    JOIN webhook_deliveries y ON y.provider = d.provider AND y.event_id = d.event_id AND y.route = p.route
    WHERE y.result IS NOT NULL)`

// loadDeliveriesSQL loads the deliveries of arrays of keys, numbered as
// given: one primary-key lookup per key (see lockClaimsSQL on why not a join;
// LIMIT keeps the planner from flattening it back into one).
var loadDeliveriesSQL = `
SELECT k.i, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(provider, event_id, route, i)
CROSS JOIN LATERAL (
    SELECT ` + deliveryColumns("''", "NULL::text", predecessorResultsSQL, "c.payload") + `
    FROM webhook_deliveries d
    JOIN webhook_event_claims c USING (provider, event_id)
    WHERE d.provider = k.provider AND d.event_id = k.event_id AND d.route = k.route
    LIMIT 1) x`

// LoadDeliveries is LoadDelivery for many keys in one query: ds[i] is the
// delivery of keys[i], or nil when there is none.
func (s *Store) LoadDeliveries(ctx context.Context, keys []Key) (ds []*Delivery, err error) {
	providers, ids, routes := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		providers[i], ids[i], routes[i] = k.Provider, k.EventID, k.Route
	}
	type numbered struct {
		I int
		Delivery
	}
	// On its generic plan (genericPlansSQL): the batch is one implicit
	// transaction, whose end ends the setting.
	var b pgx.Batch
	queueGenericPlans(&b)
	var found []numbered
	b.Queue(loadDeliveriesSQL, providers, ids, routes).Query(func(rows pgx.Rows) (err error) {
		found, err = pgx.CollectRows(rows, pgx.RowToStructByPos[numbered])
		return err
	})
	if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("loading %d deliveries: %w", len(keys), err)
	}
	ds = make([]*Delivery, len(keys))
	for _, f := range found {
		ds[f.I-1] = &f.Delivery
	}
	return ds, nil
}

// AttemptResult is what one downstream attempt did to a delivery.
type AttemptResult struct {
	// Status is the delivery's new status: DeliveryCompleted,
	// DeliveryFailed (no further attempts), or DeliveryProcessing (another
	// attempt will follow).
	Status DeliveryStatus
	// Attempted is true when a downstream call was made (and so counts as an
	// attempt); false when the delivery is failed without one, e.g. because
	// its route no longer exists.
	Attempted bool
	// Error is the sanitized reason of a failed attempt; empty on success.
	Error string
	// Spent is how many Hookgate-Attempt numbers to add to the delivery's
	// attempt_base: all of the job's (its attempt) when the job ends, so a
	// later job of the delivery (a reopen) continues after them; 1 when
	// River hands the attempt back (a shutdown interrupt) while the number
	// may have reached the downstream; else 0.
	Spent int
	// Result is JSON (at most 1 KiB) stored with a completion: what the
	// route's result program took from the downstream's answer. Ignored
	// unless Status is Completed; nil stores none.
	Result []byte
	// Release says that other routes run after this delivery's: a
	// completion then releases, in the same transaction, the deliveries of
	// its claim that waited for it and have no other predecessor left (see
	// EndJobs). Ignored unless Status is Completed.
	Release bool
	// Call is the downstream call the attempt made, written to the
	// delivery's attempt history with the outcome; nil writes no history
	// row (no call was made).
	Call *Call
}

// Call is one downstream call of a delivery, a row of its attempt history
// (webhook_attempts). Its error is the AttemptResult's.
type Call struct {
	// Attempt is the Hookgate-Attempt number sent.
	Attempt int
	// StartedAt is when the request went out; Duration how long until the
	// answer or the error.
	StartedAt time.Time
	Duration  time.Duration
	// Status is the answer's HTTP status, 0 when none came.
	Status int
	// Response is the first 2 KiB of the answer's body, redacted; nil when
	// none came.
	Response *string
	// Request is what was sent, secret header values redacted; nil when
	// not known. ResponseHeaders are the answer's headers, redacted; nil
	// when none came. Each holds at most MaxHistoryHeaderBytes of headers.
	Request         *SentRequest
	ResponseHeaders map[string][]string
	// RunAttempt and RunMax are River's attempt and max_attempts of the
	// job that made the call: its place in the run of attempts since the
	// delivery was claimed or last retried. 0 when not known.
	RunAttempt, RunMax int
}

// RecordAttempt writes an attempt's outcome: the delivery's status, attempt
// count and last error, then the claim's roll-up, in s's transaction (see
// Transact) or in one of its own. It locks the claim row first, so that
// roll-ups of concurrent deliveries of one claim are serialized and the
// claim's status is computed from committed siblings. It returns
// ErrConflict when the delivery is no longer processing and ErrNotFound
// when its claim does not exist.
func (s *Store) RecordAttempt(ctx context.Context, k Key, r AttemptResult) error {
	recorded, err := s.RecordAttempts(ctx, []Attempt{{Key: k, Result: r}})
	if err != nil || recorded[0] {
		return err
	}
	exists, err := s.claimExists(ctx, k)
	switch {
	case err != nil:
		return fmt.Errorf("recording attempt for %s: %w", k, err)
	case !exists:
		return fmt.Errorf("recording attempt for %s: %w", k, ErrNotFound)
	}
	return fmt.Errorf("updating delivery %s: it is no longer processing: %w", k, ErrConflict)
}

// Attempt is one delivery's attempt outcome, for RecordAttempts.
type Attempt struct {
	Key    Key
	Result AttemptResult
}

// JobRun is the run of a delivery job that made an attempt: the job's id
// and River's attempt number of that run.
type JobRun struct {
	ID      int64
	Attempt int
}

// EndJobs ends delivery jobs in one transaction and one round trip: for
// each attempts[i] made by the run jobs[i], it records the outcome (see
// RecordAttempts) and deletes the finished job's row (deleteJobsSQL: the
// delivery and its history are the record, not River's row). The
// transaction is s's when s is one Transact handed out; else the
// statements, sent together, run as one implicit transaction that commits
// once all have succeeded (pgx.Conn.SendBatch), so no BEGIN or COMMIT
// costs a round trip of its own. It locks the claims first, in key order,
// then the jobs, in id order: every path that settles a delivery takes its
// claim's lock before its job's, so two transactions sharing a job wait at
// the claim instead of deadlocking.
//
// River's fence: only jobs still running the attempt that ended are
// touched. A job River rescued meanwhile and started again (a higher
// attempt) is left alone, and so is its delivery: the new run owns it.
// live[i] says whether jobs[i] was still running and is now deleted;
// recorded[i] whether attempts[i] was written (false also when the
// delivery was no longer processing). Keys must be distinct.
func (s *Store) EndJobs(ctx context.Context, attempts []Attempt, jobs []JobRun) (live, recorded []bool, err error) {
	var claims []Attempt
	for _, a := range attempts {
		if a.Result.Release && a.Result.Status == DeliveryCompleted {
			claims = append(claims, a)
		}
	}
	// Both batches run on generic plans (genericPlansSQL), to their
	// transaction's end.
	if len(claims) == 0 {
		var b pgx.Batch
		queueGenericPlans(&b)
		queueLockClaims(&b, attempts)
		s.river().JobLockRunningMany(&b, jobs)
		recorded = queueRecordAttempts(&b, attempts, jobs)
		live = s.river().JobDeleteRunningMany(&b, jobs)
		if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
			return nil, nil, fmt.Errorf("ending %d jobs: %w", len(jobs), err)
		}
		return live, recorded, nil
	}
	// Completions that may release dependents: the same statements, then
	// the release, in one batch, and the released deliveries' jobs
	// inserted (River's InsertManyFastTx) before the one commit.
	err = s.inTx(ctx, func(tx *Store) error {
		var b pgx.Batch
		queueGenericPlans(&b)
		queueLockClaims(&b, attempts)
		tx.river().JobLockRunningMany(&b, jobs)
		recorded = queueRecordAttempts(&b, attempts, jobs)
		released := queueRelease(&b, claims)
		live = tx.river().JobDeleteRunningMany(&b, jobs)
		if err := tx.db.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		return tx.enqueueKeys(ctx, *released, nil)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ending %d jobs: %w", len(jobs), err)
	}
	return live, recorded, nil
}

// releaseSQL releases the waiting deliveries of the claims in the arrays
// whose predecessors (waits_for) have all completed: they become
// processing, and the caller inserts their jobs in the same transaction.
// The caller holds the claims' locks, so no other transaction changes
// their deliveries meanwhile; as a later statement of that transaction it
// sees the completions recorded before it. Each claim's deliveries are read
// through the primary key's prefix (OFFSET 0 keeps Postgres from
// flattening the lookup into a join over the table; see lockClaimsSQL).
const releaseSQL = `
UPDATE webhook_deliveries d SET status = 'processing', updated_at = now()
FROM (
    SELECT x.tid
    FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS c(provider, event_id)) c
    CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.status, w.waits_for FROM webhook_deliveries w
        WHERE w.provider = c.provider AND w.event_id = c.event_id
        OFFSET 0) x
    WHERE x.status = 'waiting'
      AND NOT EXISTS (
          SELECT 1 FROM unnest(x.waits_for) AS p(route)
          WHERE NOT EXISTS (
              SELECT 1 FROM webhook_deliveries y
              WHERE y.provider = c.provider AND y.event_id = c.event_id AND y.route = p.route
                AND y.status = 'completed'))) v
WHERE d.ctid = v.tid
RETURNING d.provider, d.event_id, d.route`

// queueRelease queues releaseSQL for the claims of attempts; the returned
// keys are the deliveries released, once the batch has run.
func queueRelease(b *pgx.Batch, attempts []Attempt) *[]Key {
	providers, ids := make([]string, len(attempts)), make([]string, len(attempts))
	for i, a := range attempts {
		providers[i], ids[i] = a.Key.Provider, a.Key.EventID
	}
	released := new([]Key)
	b.Queue(releaseSQL, providers, ids).Query(func(rows pgx.Rows) error {
		keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
		if err != nil {
			return fmt.Errorf("releasing waiting deliveries: %w", err)
		}
		*released = keys
		return nil
	})
	return released
}

// lockClaimsSQL takes the row locks of the claims of arrays of keys, in
// key order, so that transactions settling overlapping sets of deliveries
// never deadlock: every change of a delivery's status holds its claim's
// lock first. One index lookup per key: a plain join here is planned as a
// hash join over the whole table (Postgres cannot estimate a two-column
// match against an array), which grows with the table.
const lockClaimsSQL = `
SELECT 1
FROM (SELECT * FROM unnest($1::text[], $2::text[]) AS k(provider, event_id) ORDER BY 1, 2) k
CROSS JOIN LATERAL (
    SELECT 1 FROM webhook_event_claims c
    WHERE c.provider = k.provider AND c.event_id = k.event_id
    FOR UPDATE) locked`

// claimExists reports whether the claim of k exists, to tell ErrNotFound
// from ErrConflict after the fact; the happy path never asks.
func (s *Store) claimExists(ctx context.Context, k Key) (bool, error) {
	var ok bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_event_claims WHERE provider = $1 AND event_id = $2)`,
		k.Provider, k.EventID).Scan(&ok); err != nil {
		return false, fmt.Errorf("reading whether the claim exists: %w", err)
	}
	return ok, nil
}

// RecordAttempts is RecordAttempt for many deliveries in one transaction
// (s's, or an implicit one: see EndJobs) and one round trip, whatever their
// number: lock the claims (see lockClaimsSQL), then update the deliveries
// still processing and roll their claims up. recorded[i] is false when
// attempts[i]'s delivery was not processing (settled elsewhere) or does
// not exist; nothing is written for it. Keys must be distinct.
func (s *Store) RecordAttempts(ctx context.Context, attempts []Attempt) ([]bool, error) {
	var b pgx.Batch
	queueLockClaims(&b, attempts)
	recorded := queueRecordAttempts(&b, attempts, nil)
	if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("recording %d attempts: %w", len(attempts), err)
	}
	return recorded, nil
}

// queueLockClaims queues the statement that locks the claims of attempts
// (lockClaimsSQL).
func queueLockClaims(b *pgx.Batch, attempts []Attempt) {
	providers, ids := make([]string, len(attempts)), make([]string, len(attempts))
	for i, a := range attempts {
		providers[i], ids[i] = a.Key.Provider, a.Key.EventID
	}
	b.Queue(lockClaimsSQL, providers, ids).Exec(func(pgconn.CommandTag) error { return nil })
}

// queueRecordAttempts queues the statement that records attempts, after
// their claims' locks: each delivery still processing (and, when jobs is
// not nil, whose job jobs[i] is still running that attempt) is updated and
// its claim rolled up, and the attempts that made a call get their
// history row. The returned slice says which were recorded once the batch
// has run.
func queueRecordAttempts(b *pgx.Batch, attempts []Attempt, jobs []JobRun) []bool {
	n := len(attempts)
	providers, ids, routes := make([]string, n), make([]string, n), make([]string, n)
	statuses, counts, errs, spent := make([]string, n), make([]int32, n), make([]*string, n), make([]int32, n)
	results := make([]*string, n)
	jobIDs, jobAttempts := make([]*int64, n), make([]int32, n)
	calls := newCallColumns(n)
	for i, a := range attempts {
		calls.set(i, a.Result.Call)
		spent[i] = int32(a.Result.Spent)
		providers[i], ids[i], routes[i] = a.Key.Provider, a.Key.EventID, a.Key.Route
		statuses[i] = string(a.Result.Status)
		if a.Result.Attempted {
			counts[i] = 1
		}
		if a.Result.Error != "" {
			errs[i] = &a.Result.Error
		}
		if a.Result.Result != nil {
			r := string(a.Result.Result)
			results[i] = &r
		}
		if jobs != nil {
			jobIDs[i], jobAttempts[i] = &jobs[i].ID, int32(jobs[i].Attempt)
		}
	}
	recorded := make([]bool, n)
	b.Queue(recordAttemptsSQL, providers, ids, routes, statuses, counts, errs, spent, results, jobIDs, jobAttempts,
		calls.nums, calls.starts, calls.durations, calls.statuses, calls.responses,
		calls.requests, calls.responseHeaders, calls.runAttempts, calls.runMaxes).
		Query(func(rows pgx.Rows) error {
			nums, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("recording %d attempts: %w", n, err)
			}
			for _, i := range nums {
				recorded[i-1] = true
			}
			return nil
		})
	return recorded
}

// recordAttemptsSQL writes attempt outcomes to the deliveries still
// processing, rolls their claims up, and returns the numbers (from 1) of
// the attempts it wrote. The caller holds the claims' locks: this
// statement's snapshot, taken after them, sees every sibling delivery that
// settled before.
//
// Each delivery is found by its own primary-key lookup, locked, and
// updated through its row's ctid. Written as a join with the array,
// Postgres plans it from the processing index as soon as its statistics
// lag a backlog (a worker catching up after an outage, a fresh table),
// and then reads every processing delivery for every batch (measured in
// docs/benchmarks.md). The lateral lookup names no status, and its LIMIT
// keeps Postgres from flattening it or pushing the status test into it
// (see lockRunningJobsSQL), so the processing index can never serve it; a
// ctid is always found directly (TestJobEndsFollowPrimaryKeysWhenStatisticsLag).
//
// An attempt that names its job ($9, $10) is recorded only while that job
// is still running that attempt (River's fence; riverTables.jobRunningSQL).
//
// An attempt that made a call ($11 not NULL) gets its row of history
// ($11 to $19)
// (webhook_attempts) from the same statement, for exactly the deliveries
// it records: the history needs no lookups of its own, and no row is ever
// written for an attempt that was not recorded.
//
// The roll-up recomputes each claim's status from its deliveries:
// completed once all are completed or skipped, failed once one failed and
// none is processing, else processing (waiting is not done). It adds the attempts just recorded
// and keeps the latest error, cleared once the claim completes. Its reads of the deliveries cannot see this
// statement's own updates, so a delivery just recorded counts with its new
// status.
var recordAttemptsSQL = `
WITH v AS (
    SELECT v.*, x.tid
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::int[], $8::text[],
                $9::bigint[], $10::int[])
        WITH ORDINALITY AS v(provider, event_id, route, status, attempts, error, spent, result, job, job_attempt, i)
    CROSS JOIN LATERAL (
        SELECT x.ctid AS tid, x.status FROM webhook_deliveries x
        WHERE x.provider = v.provider AND x.event_id = v.event_id AND x.route = v.route
        LIMIT 1 FOR UPDATE) x
    WHERE x.status = 'processing'
      AND (v.job IS NULL OR ` + riverTables{}.jobRunningSQL("v.job", "v.job_attempt") + `)
), recorded AS (
    UPDATE webhook_deliveries d SET
        status = v.status,
        attempt_count = d.attempt_count + v.attempts,
        -- A completion clears the error of the failed attempts before it
        -- (the history keeps them).
        last_error = CASE WHEN v.status = 'completed' THEN NULL ELSE coalesce(v.error, d.last_error) END,
        completed_at = CASE WHEN v.status = 'completed' THEN now() END,
        attempt_base = d.attempt_base + v.spent,
        result = CASE WHEN v.status = 'completed' THEN v.result::jsonb END,
        updated_at = now()
    FROM v
    -- The ctids as an array as well: a TID scan whatever the planner
    -- thinks of the table's size (see TestJobEndsFollowPrimaryKeysOnSmallTables).
    WHERE d.ctid = ANY (ARRAY(SELECT tid FROM v)) AND d.ctid = v.tid
    RETURNING v.i, d.provider, d.event_id, d.route, d.status, v.attempts, v.error
), history AS (
    INSERT INTO webhook_attempts (provider, event_id, route, attempt, started_at, duration_ms, status_code, error, response,
                                  request, response_headers, run_attempt, run_max)
    SELECT r.provider, r.event_id, r.route, h.attempt, h.started_at, h.duration_ms, h.status_code, r.error, h.response,
           h.request::jsonb, h.response_headers::jsonb, h.run_attempt, h.run_max
    FROM recorded r
    JOIN unnest($11::int[], $12::timestamptz[], $13::int[], $14::int[], $15::text[], $16::text[], $17::text[], $18::int[], $19::int[])
        WITH ORDINALITY AS h(attempt, started_at, duration_ms, status_code, response, request, response_headers, run_attempt, run_max, i)
        ON h.i = r.i
    WHERE h.attempt IS NOT NULL
), claims AS (
    -- Each claim's row, found through the primary key (the caller holds
    -- its lock, so it stays where it is) and updated through its ctid.
    SELECT g.*, e.tid
    FROM (
        SELECT provider, event_id, sum(attempts) AS attempts,
               (array_agg(error ORDER BY i DESC) FILTER (WHERE error IS NOT NULL))[1] AS error,
               array_agg(route) AS routes, array_agg(status) AS statuses
        FROM recorded
        GROUP BY provider, event_id) g
    CROSS JOIN LATERAL (
        SELECT e.ctid AS tid FROM webhook_event_claims e
        WHERE e.provider = g.provider AND e.event_id = g.event_id
        LIMIT 1) e
), rolled AS (
    UPDATE webhook_event_claims c SET
        status = s.status,
        completed_at = CASE WHEN s.status = 'completed' THEN coalesce(c.completed_at, now()) END,
        attempt_count = c.attempt_count + v.attempts,
        last_error = CASE WHEN s.status = 'completed' THEN NULL ELSE coalesce(v.error, c.last_error) END,
        updated_at = now()
    FROM claims v CROSS JOIN LATERAL (
        -- Per claim, through the primary key's prefix: a join here would be
        -- planned over the whole deliveries table.
        -- Skipped deliveries count as done; a claim with nothing but skipped
        -- deliveries is ignored.
        -- A waiting delivery is not done: behind a failed one the claim is
        -- failed; otherwise it is about to be released (by this
        -- transaction or the reconciler) and the claim is processing.
        SELECT CASE WHEN count(*) FILTER (WHERE coalesce(r.status, d.status) = 'processing') > 0 THEN 'processing'
                    WHEN count(*) FILTER (WHERE coalesce(r.status, d.status) = 'failed') > 0     THEN 'failed'
                    WHEN count(*) FILTER (WHERE coalesce(r.status, d.status) = 'waiting') > 0    THEN 'processing'
                    WHEN count(*) FILTER (WHERE coalesce(r.status, d.status) <> 'skipped') = 0   THEN 'ignored'
                    ELSE 'completed' END AS status
        -- The claim's deliveries recorded just now, from its own arrays:
        -- a join with recorded would read the whole batch per claim.
        FROM webhook_deliveries d
        LEFT JOIN unnest(v.routes, v.statuses) AS r(route, status) ON r.route = d.route
        WHERE d.provider = v.provider AND d.event_id = v.event_id) s
    WHERE c.ctid = ANY (ARRAY(SELECT tid FROM claims)) AND c.ctid = v.tid AND c.status <> 'ignored'
)
SELECT i FROM recorded`

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
