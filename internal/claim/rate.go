package claim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// RateSettings are a route's rate (config.Rate): at most Limit requests
// per Per, plus Burst once.
type RateSettings struct {
	Limit int
	Per   time.Duration
	Burst int
}

// capacity is the most tokens the route's bucket holds: Burst + 1. With it,
// any window of Per sees at most Limit + Burst requests: the bucket's
// content when the window opens, plus less than Limit refilled inside it.
func (s RateSettings) capacity() float64 { return float64(s.Burst) + 1 }

// perSecond is the bucket's refill, in tokens a second.
func (s RateSettings) perSecond() float64 { return float64(s.Limit) / s.Per.Seconds() }

// Interval is the time one token takes to refill: Per / Limit.
func (s RateSettings) Interval() time.Duration { return s.Per / time.Duration(max(s.Limit, 1)) }

// RateGrant is what RateTake gave.
type RateGrant struct {
	// Granted is how many tokens were taken: each one request, to be sent
	// at once.
	Granted int
	// NextAt is when the route's next token is free (the end of a hold,
	// or the refill of the token after the ones taken), at the database's
	// time.
	NextAt time.Time
	// HeldUntil is the end of the downstream's Retry-After hold; nil when
	// the route is not held.
	HeldUntil *time.Time
	// Now is the database's time of the take.
	Now time.Time
}

// rateTakeSQL takes up to $4 whole tokens from route $1's bucket, holding
// $2 at most and refilled at $3 a second, unless a Retry-After holds the
// route. The row is locked first (FOR UPDATE in the first CTE), so that
// concurrent takes on every replica are serialized and each computes from
// the row the last one wrote; the refill runs from refilled_at, moved to
// the take's time (never back: a take that waited for the lock computes at
// the later of its now() and the row's time). It returns the tokens taken,
// those left, the row's time and the hold.
const rateTakeSQL = `
WITH cur AS (
    SELECT held_until, greatest(now(), refilled_at) AS at,
           least($2::float8, tokens + greatest(0, extract(epoch FROM now() - refilled_at))::float8 * $3::float8) AS avail
    FROM route_rates WHERE route = $1 FOR UPDATE
), g AS (
    SELECT at, avail, held_until,
           CASE WHEN held_until > at THEN 0 ELSE least($4::int, floor(avail + 1e-9)::int) END AS n
    FROM cur
), upd AS (
    UPDATE route_rates r SET tokens = g.avail - g.n, refilled_at = g.at
    FROM g WHERE r.route = $1 AND g.n > 0
)
SELECT n, avail - n, at, CASE WHEN held_until > at THEN held_until END FROM g`

// RateTake takes up to want tokens of route's rate, in one statement
// (rateTakeSQL) that is correct however many workers take at once: the sum
// of the tokens granted over any window of set.Per is at most set.Limit +
// set.Burst. A route without a row starts with a full bucket. When it
// grants fewer than want, NextAt says when to ask again.
func (s *Store) RateTake(ctx context.Context, route string, set RateSettings, want int) (RateGrant, error) {
	if set.Limit < 1 || set.Per <= 0 || want < 1 {
		return RateGrant{}, fmt.Errorf("taking tokens of route %s: a rate needs a positive limit, window and take", route)
	}
	for range 2 {
		var g RateGrant
		var left float64
		err := s.db.QueryRow(ctx, rateTakeSQL, route, set.capacity(), set.perSecond(), want).Scan(&g.Granted, &left, &g.Now, &g.HeldUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := s.db.Exec(ctx, `INSERT INTO route_rates (route, tokens) VALUES ($1, $2) ON CONFLICT (route) DO NOTHING`,
				route, set.capacity()); err != nil {
				return RateGrant{}, fmt.Errorf("taking tokens of route %s: %w", route, err)
			}
			continue
		}
		if err != nil {
			return RateGrant{}, fmt.Errorf("taking tokens of route %s: %w", route, err)
		}
		switch {
		case g.HeldUntil != nil:
			g.NextAt = *g.HeldUntil
		case left >= 1:
			g.NextAt = g.Now
		default:
			g.NextAt = g.Now.Add(time.Duration(math.Ceil((1 - left) / set.perSecond() * float64(time.Second))))
		}
		return g, nil
	}
	return RateGrant{}, fmt.Errorf("taking tokens of route %s: its row vanished", route)
}

// RateHold holds route until d from now (the database's time), on every
// replica: a downstream's Retry-After. A hold never shortens one already
// set. A route without a rate gets a row for it. It returns the end of the
// hold.
func (s *Store) RateHold(ctx context.Context, route string, d time.Duration) (time.Time, error) {
	var until time.Time
	err := s.db.QueryRow(ctx, `INSERT INTO route_rates (route, held_until) VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (route) DO UPDATE SET held_until = greatest(route_rates.held_until, EXCLUDED.held_until)
RETURNING held_until`, route, d.Seconds()).Scan(&until)
	if err != nil {
		return time.Time{}, fmt.Errorf("holding route %s: %w", route, err)
	}
	return until, nil
}

// RateState is a route's rate as stored.
type RateState struct {
	// Tokens is what the bucket held at RefilledAt.
	Tokens     float64
	RefilledAt time.Time
	// HeldUntil is the end of a downstream's Retry-After hold; nil when
	// none is in force.
	HeldUntil *time.Time
	// Now is the database's time of the read.
	Now time.Time
}

// Rates returns the rate rows of routes, by name; a route without one is
// left out.
func (s *Store) Rates(ctx context.Context, routes []string) (map[string]RateState, error) {
	rows, err := s.db.Query(ctx, `SELECT route, tokens, refilled_at, CASE WHEN held_until > now() THEN held_until END, now()
FROM route_rates WHERE route = ANY($1)`, routes)
	if err != nil {
		return nil, fmt.Errorf("reading the routes' rates: %w", err)
	}
	defer rows.Close()
	out := make(map[string]RateState, len(routes))
	for rows.Next() {
		var route string
		var st RateState
		if err := rows.Scan(&route, &st.Tokens, &st.RefilledAt, &st.HeldUntil, &st.Now); err != nil {
			return nil, fmt.Errorf("reading the routes' rates: %w", err)
		}
		out[route] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the routes' rates: %w", err)
	}
	return out, nil
}

// RouteHeld counts each of routes' held deliveries: those whose jobs are
// snoozed on the route's queue, by its open circuit, its rate or a
// Retry-After (riverTables.JobCountSnoozedByQueue). A route with none is
// left out.
func (s *Store) RouteHeld(ctx context.Context, routes []string) (map[string]int, error) {
	byQueue := make(map[string]string, len(routes))
	queues := make([]string, len(routes))
	for i, r := range routes {
		queues[i] = Queue(r)
		byQueue[queues[i]] = r
	}
	out := make(map[string]int, len(routes))
	if err := s.river().JobCountSnoozedByQueue(ctx, queues, func(queue string, n int) { out[byQueue[queue]] = n }); err != nil {
		return nil, fmt.Errorf("counting the routes' held deliveries: %w", err)
	}
	return out, nil
}

// RateInfo is a paced route's rate as `GET /api/v1/routes` and `worker
// routes list` show it.
type RateInfo struct {
	Limit int    `json:"limit"`
	Per   string `json:"per"` // a Go duration: "1s"
	Burst int    `json:"burst"`
	// HeldUntil is the end of a downstream's Retry-After hold; nil when
	// none is in force.
	HeldUntil *time.Time `json:"held_until"`
}

// Hold is why and until when a delivery is held back, as its claim's page
// says it.
type Hold struct {
	// Cause is "circuit" (its route's circuit is open), "retry_after" (a
	// downstream's Retry-After holds the route) or "rate" (the route's
	// rate).
	Cause string
	// Until is when the delivery is tried again.
	Until time.Time
}

// Holds returns, by route, why each processing delivery of the claim
// whose job is snoozed waits (see Hold); paced says which routes have a
// rate. A snoozed delivery of a route neither open, held nor paced (its
// circuit closed a moment ago) is left out.
func (s *Store) Holds(ctx context.Context, provider, eventID string, paced func(route string) bool) (map[string]Hold, error) {
	snoozed := map[string]time.Time{}
	if err := s.river().DeliveryListSnoozed(ctx, provider, eventID, func(route string, until time.Time) { snoozed[route] = until }); err != nil {
		return nil, fmt.Errorf("reading the held deliveries of %s/%s: %w", provider, eventID, err)
	}
	if len(snoozed) == 0 {
		return nil, nil
	}
	routes := make([]string, 0, len(snoozed))
	for r := range snoozed {
		routes = append(routes, r)
	}
	breakers, err := s.Breakers(ctx, routes)
	if err != nil {
		return nil, err
	}
	rates, err := s.Rates(ctx, routes)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Hold, len(snoozed))
	for r, until := range snoozed {
		switch {
		case breakers[r].State != BreakerClosed:
			out[r] = Hold{Cause: "circuit", Until: until}
		case rates[r].HeldUntil != nil:
			out[r] = Hold{Cause: "retry_after", Until: *rates[r].HeldUntil}
		case paced(r):
			out[r] = Hold{Cause: "rate", Until: until}
		}
	}
	return out, nil
}
