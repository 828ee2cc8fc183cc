package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// statusCountsSQL is StatusCounts' statement.
const statusCountsSQL = `SELECT status, count(*) FROM webhook_event_claims
WHERE first_seen_at >= $1 GROUP BY status`

// StatusCounts counts the claims first seen since since, by status,
// through the keyset index on first_seen_at, planned for since (planEach).
func (s *Store) StatusCounts(ctx context.Context, since time.Time) (map[Status]int, error) {
	rows, err := s.db.Query(ctx, statusCountsSQL, planEach, since)
	if err != nil {
		return nil, fmt.Errorf("counting claims by status: %w", err)
	}
	out := map[Status]int{}
	var st Status
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil }); err != nil {
		return nil, fmt.Errorf("counting claims by status: %w", err)
	}
	return out, nil
}

// Activity is one route's deliveries made in one interval (those of the
// claims first seen in it): how many were accepted (made), and of those
// how many are delivered (completed) and failed by now.
type Activity struct {
	Route     string
	Interval  int // from 0, the oldest
	Accepted  int
	Delivered int
	Failed    int
}

// routeActivitySQL is RouteActivity's statement: for each interval, the
// deliveries made in it, found through migration 26's BRIN index on
// created_at, with no join to the claims (see the statements of Stats).
// An interval is a range of created_at of its own rather than a bucket
// computed from each row: the planner cannot tell how few buckets an
// expression of created_at makes, and sorted a day's deliveries to group
// them. OFFSET 0 keeps each interval's read a lookup of its own range:
// flattened into a join, the generic plan of a prepared statement, which
// cannot know how many intervals there are, could scan every delivery and
// test it against each interval.
const routeActivitySQL = `
SELECT d.route, b.i,
       count(*),
       count(*) FILTER (WHERE d.status = 'completed'),
       count(*) FILTER (WHERE d.status = 'failed')
FROM generate_series(0, $3::int - 1) AS b(i)
CROSS JOIN LATERAL (
    SELECT route, status FROM webhook_deliveries
    WHERE created_at >= $1::timestamptz + make_interval(secs => $2::float8 * b.i)
      AND created_at < $1::timestamptz + make_interval(secs => $2::float8 * (b.i + 1))
    OFFSET 0) d
GROUP BY d.route, b.i
ORDER BY d.route, b.i`

// RouteActivity buckets, by route, the deliveries made in [since, since +
// n*step) (those of the claims first seen then) into n intervals of step:
// one query, reading each interval's deliveries through the created_at
// index, planned for its window (planEach). Intervals with no delivery are
// absent.
func (s *Store) RouteActivity(ctx context.Context, since time.Time, step time.Duration, n int) ([]Activity, error) {
	rows, err := s.db.Query(ctx, routeActivitySQL, planEach, since, step.Seconds(), n)
	if err != nil {
		return nil, fmt.Errorf("reading the routes' activity: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Activity])
	if err != nil {
		return nil, fmt.Errorf("reading the routes' activity: %w", err)
	}
	return out, nil
}
