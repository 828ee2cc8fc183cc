package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
)

// This file holds every query hookgate makes on River's own table,
// river_job. The table is River's internals, not its public API: the
// queries were checked against github.com/riverqueue/river v0.51.2 (the
// river_job schema of River's migrations up to that release, and what its
// JobCompleteTx writes). Check them again on every River upgrade.

// liveJobSQL is true when a delivery (aliased d) has a job River will still
// run. It finds the job through River's GIN index on args.
const liveJobSQL = `EXISTS (
    SELECT 1 FROM river_job j
    WHERE j.kind = '` + DeliveryKind + `'
      AND j.args @> jsonb_build_object('provider', d.provider, 'event_id', d.event_id, 'route', d.route)
      AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))`

// latestJobSQL is a LATERAL subquery giving the latest job of a delivery
// (aliased d): its state, attempt and finalized_at.
const latestJobSQL = `(
    SELECT state, attempt, finalized_at FROM river_job j
    WHERE j.kind = '` + DeliveryKind + `'
      AND j.args @> jsonb_build_object('provider', d.provider, 'event_id', d.event_id, 'route', d.route)
    ORDER BY j.id DESC LIMIT 1)`

// moveJobsSQL moves up to $3 waiting delivery jobs that are not on their
// route's queue to it: the queue $2 pairs with their route in $1, or the
// default queue for a route not listed. Running jobs are left alone, and
// so are jobs locked at that moment (a worker fetching them): SKIP LOCKED.
const moveJobsSQL = `
WITH target AS (
    SELECT route, queue FROM unnest($1::text[], $2::text[]) AS t(route, queue)
), moving AS (
    SELECT j.id, coalesce(t.queue, '` + river.QueueDefault + `') AS queue
    FROM river_job j LEFT JOIN target t ON t.route = j.args->>'route'
    WHERE j.kind = '` + DeliveryKind + `'
      AND j.state IN ('available', 'pending', 'retryable', 'scheduled')
      AND j.queue <> coalesce(t.queue, '` + river.QueueDefault + `')
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE river_job j SET queue = moving.queue FROM moving WHERE j.id = moving.id`

// routeJobsSQL counts the unfinished delivery jobs of routes, on whatever
// queue they are.
const routeJobsSQL = `
SELECT args->>'route',
       count(*) FILTER (WHERE state = 'available'),
       count(*) FILTER (WHERE state = 'retryable'),
       count(*) FILTER (WHERE state = 'running')
FROM river_job
WHERE kind = '` + DeliveryKind + `' AND state IN ('available', 'retryable', 'running')
  AND args->>'route' = ANY($1)
GROUP BY 1`

// JobRun is the run of a delivery job that made an attempt: the job's id
// and River's attempt number of that run.
type JobRun struct {
	ID      int64
	Attempt int
}

// EndJobs ends delivery jobs in one transaction and one round trip: for
// each attempts[i] made by the run jobs[i], it records the outcome (see
// RecordAttempts) and completes the job, as river.JobCompleteTx would. The
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
// live[i] says whether jobs[i] was still running and is now completed;
// recorded[i] whether attempts[i] was written (false also when the
// delivery was no longer processing). Keys must be distinct.
func (s *Store) EndJobs(ctx context.Context, attempts []Attempt, jobs []JobRun) (live, recorded []bool, err error) {
	ids, runs := make([]int64, len(jobs)), make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], runs[i] = j.ID, int32(j.Attempt)
	}
	var b pgx.Batch
	queueLockClaims(&b, attempts)
	b.Queue(lockRunningJobsSQL, ids, runs).Exec(func(pgconn.CommandTag) error { return nil })
	recorded = queueRecordAttempts(&b, attempts, jobs)
	live = make([]bool, len(jobs))
	b.Queue(completeJobsSQL, ids, runs, time.Now()).Query(func(rows pgx.Rows) error {
		nums, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("completing %d jobs: %w", len(jobs), err)
		}
		for _, i := range nums {
			live[i-1] = true
		}
		return nil
	})
	if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
		return nil, nil, fmt.Errorf("ending %d jobs: %w", len(jobs), err)
	}
	return live, recorded, nil
}

// lockRunningJobsSQL locks the jobs of ids still running attempts, in id
// order, each by its own primary-key lookup (see lockClaimsSQL on why not a
// join). The state is tested outside the lookup, which LIMIT keeps
// Postgres from pushing it into: River's fetching index leads with the
// state, and when statistics lag it is chosen to serve the lookup, reading
// every running job for each one.
const lockRunningJobsSQL = `
SELECT x.id
FROM (SELECT * FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt) ORDER BY 1) v
CROSS JOIN LATERAL (
    SELECT j.id, j.state FROM river_job j
    WHERE j.id = v.id AND j.attempt = v.attempt
    LIMIT 1 FOR UPDATE) x
WHERE x.state = 'running'`

// completeJobsSQL completes the jobs of ids still running attempts, which
// lockRunningJobsSQL locked, and returns their numbers (from 1): what
// river.JobCompleteTx writes for one job (state and finalized_at; River's
// completion carries no metadata here), for all of them in one statement.
// The public call costs a statement, and so a round trip, per job: in a
// batch of ends that share one transaction that cost more than a tenth of
// the worker's drain rate (docs/benchmarks.md). Rows are found as in
// lockRunningJobsSQL and updated through their ctids.
const completeJobsSQL = `
UPDATE river_job j SET state = 'completed', finalized_at = $3
FROM (
    SELECT v.i, x.tid
    FROM unnest($1::bigint[], $2::int[]) WITH ORDINALITY AS v(id, attempt, i)
    CROSS JOIN LATERAL (
        SELECT r.ctid AS tid, r.state FROM river_job r
        WHERE r.id = v.id AND r.attempt = v.attempt
        LIMIT 1) x
    WHERE x.state = 'running') v
WHERE j.ctid = v.tid
RETURNING v.i`
