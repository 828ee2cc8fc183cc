package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// This file holds every query hookgate makes on River's own table,
// river_job, and its one use of River's driver interface. Both are River's
// internals, not its public API: they were checked against
// github.com/riverqueue/river v0.51.2 (riverdriver and riverpgxv5 v0.51.2,
// the river_job schema of River's migrations up to that release). Check
// them again on every River upgrade.

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

// LockRunningJobs locks, in tx, the rows of the jobs among ids that are still
// running attempt attempts[i] (River's fence: river.JobCompleteTx alone would
// complete a job that River rescued and started again under a higher
// attempt), and returns their ids. The caller completes only those. Rows
// are locked in id order, each by its own primary-key lookup (see
// LockClaims on why not a join). The state is tested outside the lookup,
// which LIMIT keeps Postgres from pushing it into: River's fetching index
// leads with the state, and when statistics lag it is chosen to serve
// the lookup, reading every running job for each one.
func LockRunningJobs(ctx context.Context, tx pgx.Tx, ids []int64, attempts []int32) ([]int64, error) {
	rows, err := tx.Query(ctx, lockRunningJobsSQL, ids, attempts)
	if err != nil {
		return nil, fmt.Errorf("locking %d jobs: %w", len(ids), err)
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("locking %d jobs: %w", len(ids), err)
	}
	return live, nil
}

// lockRunningJobsSQL locks the jobs of ids still running attempts.
const lockRunningJobsSQL = `
SELECT x.id
FROM (SELECT * FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt) ORDER BY 1) v
CROSS JOIN LATERAL (
    SELECT j.id, j.state FROM river_job j
    WHERE j.id = v.id AND j.attempt = v.attempt
    LIMIT 1 FOR UPDATE) x
WHERE x.state = 'running'`

// CompleteJobs completes the running jobs ids in tx, in one statement: what
// river.JobCompleteTx does for one job (without metadata updates), for all
// of them at once. The public call costs a statement per job; in a batch of
// ends that share one transaction that cost more than a tenth of the
// worker's drain rate (docs/benchmarks.md), so the driver's own batched
// statement is used here, and only here.
func CompleteJobs(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	now := time.Now()
	p := &riverdriver.JobSetStateIfRunningManyParams{}
	for _, id := range ids {
		p.ID = append(p.ID, id)
		p.Attempt = append(p.Attempt, nil)
		p.ErrData = append(p.ErrData, nil)
		p.FinalizedAt = append(p.FinalizedAt, &now)
		p.MetadataDoMerge = append(p.MetadataDoMerge, false)
		p.MetadataUpdates = append(p.MetadataUpdates, nil)
		p.ScheduledAt = append(p.ScheduledAt, nil)
		p.State = append(p.State, rivertype.JobStateCompleted)
	}
	if _, err := riverpgxv5.New(nil).UnwrapExecutor(tx).JobSetStateIfRunningMany(ctx, p); err != nil {
		return fmt.Errorf("completing %d jobs: %w", len(ids), err)
	}
	return nil
}
