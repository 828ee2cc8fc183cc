package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatusCounts counts the claims first seen since since, by status,
// through the keyset index on first_seen_at.
func (s *Store) StatusCounts(ctx context.Context, since time.Time) (map[Status]int, error) {
	rows, err := s.db.Query(ctx, `SELECT status, count(*) FROM webhook_event_claims
WHERE first_seen_at >= $1 GROUP BY status`, since)
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

// Activity is one route's deliveries of the claims first seen in one
// interval: how many were accepted (made), and of those how many are
// delivered (completed) and failed by now.
type Activity struct {
	Route     string
	Interval  int // from 0, the oldest
	Accepted  int
	Delivered int
	Failed    int
}

// routeActivitySQL is RouteActivity's statement.
const routeActivitySQL = `
SELECT d.route, b.i,
       count(*),
       count(*) FILTER (WHERE d.status = 'completed'),
       count(*) FILTER (WHERE d.status = 'failed')
FROM webhook_event_claims c
CROSS JOIN LATERAL (SELECT floor(extract(epoch FROM c.first_seen_at - $1::timestamptz) / $2::float8)::int AS i) b
JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE c.first_seen_at >= $1 AND c.first_seen_at < $1::timestamptz + make_interval(secs => $2::float8 * $3::int)
GROUP BY d.route, b.i
ORDER BY d.route, b.i`

// RouteActivity buckets, by route, the deliveries of the claims first
// seen in [since, since + n*step) into n intervals of step: one query over
// the window's claims (the keyset index on first_seen_at) and their
// deliveries (each by primary key). Intervals with no claim are absent.
func (s *Store) RouteActivity(ctx context.Context, since time.Time, step time.Duration, n int) ([]Activity, error) {
	rows, err := s.db.Query(ctx, routeActivitySQL, since, step.Seconds(), n)
	if err != nil {
		return nil, fmt.Errorf("reading the routes' activity: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Activity])
	if err != nil {
		return nil, fmt.Errorf("reading the routes' activity: %w", err)
	}
	return out, nil
}
