package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// riverChecked is the River release this file was checked against: the
// river_job and river_queue schemas of River's migrations up to it, what
// its completion (JobCompleteTx, the statement its completer sends) does
// with a job the seam deleted (TestRiverCompletionConformance) and how its
// queue calls behave, and the clients and calls of riverclient.go.
// TestRiverVersionChecked fails when go.mod moves to another release:
// check this file and riverclient.go again, then update it.
const riverChecked = "v0.51.2"

// riverTables is the one seam between the claim store and River's own
// tables. Every statement hookgate makes on river_job or river_queue is a
// method here (or, for the two statements of the claim store that test a
// job in passing, a predicate it hands out), and every call it makes to
// River's queue API goes through it. The tables are River's internals, not
// its public API: like River's driver (riverdriver.Executor), each method is
// one statement, named after River's own where there is one, so that an
// upgrade is checked in one place (riverChecked).
type riverTables struct {
	db DB
}

// river returns the seam over s's connection or transaction.
func (s *Store) river() riverTables { return riverTables{db: s.db} }

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

// deleteJobsSQL deletes the jobs of ids still running attempts, which
// lockRunningJobsSQL locked, and returns their numbers (from 1). It is the
// end of a delivery's job in the transaction that commits the delivery's
// outcome: the delivery row and its attempt history are the record
// (CONTRACT.md, "River's job rows are internal"), so the job's row is not
// kept. River's completion (river.JobCompleteTx, one statement and so one
// round trip per job; this was its set-based form until the fourth round)
// rewrote the row as completed, a new version in every one of river_job's
// indexes, its two GIN indexes among them, and River's job cleaner deleted
// it a day later: a second write of every job, and a day of jobs in the
// indexes River's fetch and the fence walk (docs/benchmarks.md, "Cost at
// scale"). Deleting it writes once, and the table stays near the jobs in
// flight. River's own completion after Work returns then finds no row,
// which its fence (JobSetStateIfRunningMany) treats as a job no longer
// running: it changes nothing (TestRiverCompletionConformance). Rows are
// found as in lockRunningJobsSQL and deleted through their ctids.
const deleteJobsSQL = `
DELETE FROM river_job j
USING (
    SELECT v.i, x.tid
    FROM unnest($1::bigint[], $2::int[]) WITH ORDINALITY AS v(id, attempt, i)
    CROSS JOIN LATERAL (
        SELECT r.ctid AS tid, r.state FROM river_job r
        WHERE r.id = v.id AND r.attempt = v.attempt
        LIMIT 1) x
    WHERE x.state = 'running') v
WHERE j.ctid = v.tid
RETURNING v.i`

// JobLockRunningMany queues the statement that locks the jobs of runs still
// running their attempts, in id order (lockRunningJobsSQL).
func (riverTables) JobLockRunningMany(b *pgx.Batch, runs []JobRun) {
	ids, attempts := jobRunArrays(runs)
	b.Queue(lockRunningJobsSQL, ids, attempts).Exec(func(pgconn.CommandTag) error { return nil })
}

// JobDeleteRunningMany queues the statement that deletes the jobs of runs
// still running their attempts (deleteJobsSQL), River's fence kept: a job
// rescued and running a later attempt is left alone. The returned slice
// says, once the batch has run, which were deleted.
func (riverTables) JobDeleteRunningMany(b *pgx.Batch, runs []JobRun) []bool {
	ids, attempts := jobRunArrays(runs)
	live := make([]bool, len(runs))
	b.Queue(deleteJobsSQL, ids, attempts).Query(func(rows pgx.Rows) error {
		nums, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("ending %d jobs: %w", len(runs), err)
		}
		for _, i := range nums {
			live[i-1] = true
		}
		return nil
	})
	return live
}

func jobRunArrays(runs []JobRun) (ids []int64, attempts []int32) {
	ids, attempts = make([]int64, len(runs)), make([]int32, len(runs))
	for i, j := range runs {
		ids[i], attempts[i] = j.ID, int32(j.Attempt)
	}
	return ids, attempts
}

// jobRunningSQL is the predicate, for a statement of the claim store, that
// the job id still runs attempt (both SQL expressions): the fence of
// recordAttemptsSQL. The state is tested outside the primary-key lookup, as
// in lockRunningJobsSQL.
func (riverTables) jobRunningSQL(id, attempt string) string {
	return `EXISTS (
          SELECT 1 FROM (SELECT j.state FROM river_job j WHERE j.id = ` + id + ` AND j.attempt = ` + attempt + ` LIMIT 1) j
          WHERE j.state = 'running')`
}

// orphansSQL finds deliveries still processing, untouched for $1 seconds,
// with no job River will still run, oldest first, at most $2.
const orphansSQL = `
SELECT d.provider, d.event_id, d.route FROM webhook_deliveries d
WHERE d.status = 'processing' AND d.updated_at < now() - make_interval(secs => $1)
  AND NOT ` + liveJobSQL + `
ORDER BY d.updated_at LIMIT $2`

// DeliveryListWithoutLiveJob returns up to limit deliveries still
// processing, untouched for at least olderThan, that no live job will run.
func (r riverTables) DeliveryListWithoutLiveJob(ctx context.Context, olderThan time.Duration, limit int) ([]Key, error) {
	rows, err := r.db.Query(ctx, orphansSQL, olderThan.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
}

// strandedSQL finds waiting deliveries, untouched for $1 seconds, whose
// predecessors have all completed and which no live job will run, oldest
// first, at most $2: a release the end transaction did not make (a worker
// that did not know the route had dependents, say).
const strandedSQL = `
SELECT d.provider, d.event_id, d.route FROM webhook_deliveries d
WHERE d.status = 'waiting' AND d.updated_at < now() - make_interval(secs => $1)
  AND NOT EXISTS (
      SELECT 1 FROM unnest(d.waits_for) AS p(route)
      WHERE NOT EXISTS (
          SELECT 1 FROM webhook_deliveries y
          WHERE y.provider = d.provider AND y.event_id = d.event_id AND y.route = p.route
            AND y.status = 'completed'))
  AND NOT ` + liveJobSQL + `
ORDER BY d.updated_at LIMIT $2`

// DeliveryListStranded returns up to limit waiting deliveries, untouched
// for at least olderThan, that could run and that no live job will run.
func (r riverTables) DeliveryListStranded(ctx context.Context, olderThan time.Duration, limit int) ([]Key, error) {
	rows, err := r.db.Query(ctx, strandedSQL, olderThan.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
}

// orphanSQL re-reads one delivery under its claim's lock: whether it is
// still processing with no live job, and the state and attempt of its
// latest job when that job finalized since the delivery last changed.
const orphanSQL = `
SELECT d.status = 'processing' AND NOT ` + liveJobSQL + `,
       CASE WHEN j.finalized_at >= d.updated_at THEN j.state::text END, j.attempt
FROM webhook_deliveries d
LEFT JOIN LATERAL ` + latestJobSQL + ` j ON true
WHERE d.provider = $1 AND d.event_id = $2 AND d.route = $3`

// DeliveryGetLatestJob is orphanSQL for k; pgx.ErrNoRows when k has no
// delivery.
func (r riverTables) DeliveryGetLatestJob(ctx context.Context, k Key) (orphan bool, lastState *string, lastAttempt *int, err error) {
	err = r.db.QueryRow(ctx, orphanSQL, k.Provider, k.EventID, k.Route).Scan(&orphan, &lastState, &lastAttempt)
	return orphan, lastState, lastAttempt, err
}

// JobMoveToRouteQueues moves up to limit waiting delivery jobs to their
// route's queue (moveJobsSQL), and returns how many it moved.
func (r riverTables) JobMoveToRouteQueues(ctx context.Context, routes, queues []string, limit int) (int, error) {
	tag, err := r.db.Exec(ctx, moveJobsSQL, routes, queues, limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// JobCountByRoute calls fn with each of routes' counts of available,
// retryable and running delivery jobs (routeJobsSQL); a route with none is
// left out.
func (r riverTables) JobCountByRoute(ctx context.Context, routes []string, fn func(route string, available, retryable, running int)) error {
	rows, err := r.db.Query(ctx, routeJobsSQL, routes)
	if err != nil {
		return err
	}
	var route string
	var available, retryable, running int
	_, err = pgx.ForEachRow(rows, []any{&route, &available, &retryable, &running}, func() error {
		fn(route, available, retryable, running)
		return nil
	})
	return err
}

// snoozedJobsSQL counts the delivery jobs River holds snoozed on each of
// the queues $1: a snooze (river.JobSnooze) with a delay puts a job in
// state scheduled and gives its attempt back, where a retry waiting out its
// backoff is retryable. Hookgate inserts no job scheduled for later, so on
// a route's queue these are the jobs its breaker, rate or a Retry-After
// holds (TestRiverSnoozeConformance). River's fetch index leads with the
// state.
const snoozedJobsSQL = `
SELECT queue, count(*) FROM river_job
WHERE state = 'scheduled' AND queue = ANY($1) AND kind = '` + DeliveryKind + `'
GROUP BY queue`

// JobCountSnoozedByQueue calls fn with each of queues' count of snoozed
// delivery jobs (snoozedJobsSQL); a queue with none is left out.
func (r riverTables) JobCountSnoozedByQueue(ctx context.Context, queues []string, fn func(queue string, snoozed int)) error {
	rows, err := r.db.Query(ctx, snoozedJobsSQL, queues)
	if err != nil {
		return err
	}
	var queue string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&queue, &n}, func() error {
		fn(queue, n)
		return nil
	})
	return err
}

// snoozedDeliveriesSQL gives, for each processing delivery of claim ($1,
// $2) whose latest job is snoozed (see snoozedJobsSQL), the time River will
// let it run again.
const snoozedDeliveriesSQL = `
SELECT d.route, j.scheduled_at
FROM webhook_deliveries d
CROSS JOIN LATERAL (
    SELECT state, scheduled_at FROM river_job j
    WHERE j.kind = '` + DeliveryKind + `'
      AND j.args @> jsonb_build_object('provider', d.provider, 'event_id', d.event_id, 'route', d.route)
    ORDER BY j.id DESC LIMIT 1) j
WHERE d.provider = $1 AND d.event_id = $2 AND d.status = 'processing' AND j.state = 'scheduled'`

// DeliveryListSnoozed calls fn with the route and the time its job runs
// again of each processing delivery of a claim whose job is snoozed
// (snoozedDeliveriesSQL).
func (r riverTables) DeliveryListSnoozed(ctx context.Context, provider, eventID string, fn func(route string, until time.Time)) error {
	rows, err := r.db.Query(ctx, snoozedDeliveriesSQL, provider, eventID)
	if err != nil {
		return err
	}
	var route string
	var until time.Time
	_, err = pgx.ForEachRow(rows, []any{&route, &until}, func() error {
		fn(route, until)
		return nil
	})
	return err
}

// JobWakeSnoozed makes the delivery jobs of queue that are snoozed
// (scheduled for later, or available but not before a later time) available
// now, as River's JobRetry does one job at a time, and returns how many.
// Retries waiting out their backoff (retryable) are left alone.
func (r riverTables) JobWakeSnoozed(ctx context.Context, queue string) (int, error) {
	tag, err := r.db.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
WHERE queue = $1 AND kind = '`+DeliveryKind+`' AND state IN ('scheduled', 'available') AND scheduled_at > now()`, queue)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// QueueCreateOrSetUpdatedAt registers queue name, as a worker does when it
// starts working it, unless it exists.
func (r riverTables) QueueCreateOrSetUpdatedAt(ctx context.Context, name string) error {
	_, err := r.db.Exec(ctx, `INSERT INTO river_queue (name, created_at, updated_at) VALUES ($1, now(), now())
ON CONFLICT (name) DO NOTHING`, name)
	return err
}

// QueueGetPausedAt returns when queue name was paused, nil when it is not;
// found is false for a queue no worker has run and none has paused.
func (riverTables) QueueGetPausedAt(ctx context.Context, q Queues, name string) (pausedAt *time.Time, found bool, err error) {
	queue, err := q.QueueGet(ctx, name)
	if errors.Is(err, rivertype.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return queue.PausedAt, true, nil
}

// QueueGetPausedAtTx is QueueGetPausedAt in tx.
func (riverTables) QueueGetPausedAtTx(ctx context.Context, q Queues, tx pgx.Tx, name string) (pausedAt *time.Time, found bool, err error) {
	queue, err := q.QueueGetTx(ctx, tx, name)
	if errors.Is(err, rivertype.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return queue.PausedAt, true, nil
}

// QueuePauseTx pauses queue name for every worker on the database once tx
// commits, registering it first in tx (River refuses to pause a queue it
// has no row of). r must be the seam over tx.
func (r riverTables) QueuePauseTx(ctx context.Context, q Queues, tx pgx.Tx, name string) error {
	if err := r.QueueCreateOrSetUpdatedAt(ctx, name); err != nil {
		return fmt.Errorf("registering queue %s: %w", name, err)
	}
	return q.QueuePauseTx(ctx, tx, name, nil)
}

// QueueResumeTx resumes queue name for every worker on the database once
// tx commits.
func (riverTables) QueueResumeTx(ctx context.Context, q Queues, tx pgx.Tx, name string) error {
	return q.QueueResumeTx(ctx, tx, name, nil)
}
