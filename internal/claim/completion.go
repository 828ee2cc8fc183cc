package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
	recorded, err := s.recordAttempts(ctx, []Attempt{{Key: k, Result: r}})
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

// Attempt is one delivery's attempt outcome, for EndJobs.
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
// recordAttempts) and deletes the finished job's row (deleteJobsSQL: the
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

// recordAttempts is RecordAttempt for many deliveries in one transaction
// (s's, or an implicit one: see EndJobs) and one round trip, whatever their
// number: lock the claims (see lockClaimsSQL), then update the deliveries
// still processing and roll their claims up. recorded[i] is false when
// attempts[i]'s delivery was not processing (settled elsewhere) or does
// not exist; nothing is written for it. Keys must be distinct.
func (s *Store) recordAttempts(ctx context.Context, attempts []Attempt) ([]bool, error) {
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
