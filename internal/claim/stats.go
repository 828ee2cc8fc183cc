package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Stats is what the claim and delivery tables hold for one window, as
// plain counts and ages: what to make of them (failure rates, order) is the
// reader's.
type Stats struct {
	// Claims counts, by provider and status, the claims first seen within
	// the window.
	Claims map[string]map[Status]int
	// Deliveries counts, by route and status, the deliveries made within
	// the window: those of the claims first seen within it, as the claim
	// statement makes a claim's deliveries with it (chained ones as
	// waiting).
	Deliveries map[string]map[DeliveryStatus]int
	// OldestClaimSeconds is, by provider, how many seconds ago the
	// provider's oldest claim still processing was first seen, whenever
	// that was; a provider with none is absent.
	OldestClaimSeconds map[string]float64
	// OldestDeliverySeconds is, by route, how many seconds ago the route's
	// oldest delivery still processing was made (its claim first seen),
	// whenever that was; a route with none is absent.
	OldestDeliverySeconds map[string]float64
}

// The statements of Stats, in the order it runs them. None joins claims
// to deliveries: a delivery's created_at is its claim's first_seen_at (the
// claim statement inserts both, in one statement), so the deliveries are
// counted by their own created_at, through migration 26's BRIN index,
// without reading the window's claims (a hash join of a day's 1,000,000
// took seconds).
const (
	statsClaimsSQL = `SELECT provider, status, count(*) FROM webhook_event_claims
WHERE first_seen_at >= now() - make_interval(secs => $1) GROUP BY provider, status`
	statsDeliveriesSQL = `SELECT route, status, count(*) FROM webhook_deliveries
WHERE created_at >= now() - make_interval(secs => $1) GROUP BY route, status`
	statsOldestClaimSQL = `SELECT provider, extract(epoch FROM now() - min(first_seen_at))::float8 FROM webhook_event_claims
WHERE status = 'processing' GROUP BY provider`
	statsOldestDeliverySQL = `SELECT route, extract(epoch FROM now() - min(created_at))::float8 FROM webhook_deliveries
WHERE status = 'processing' GROUP BY route`
)

// Stats counts the claims first seen within window, by provider, through
// the first_seen_at index, and the deliveries made within it (those of
// the same claims), by route, through the created_at index; the oldest
// processing ages come from the partial indexes on processing rows. The
// four statements run one after the other, each on its own snapshot
// unless s is a store Transact handed out.
func (s *Store) Stats(ctx context.Context, window time.Duration) (Stats, error) {
	st := Stats{
		Claims:                map[string]map[Status]int{},
		Deliveries:            map[string]map[DeliveryStatus]int{},
		OldestClaimSeconds:    map[string]float64{},
		OldestDeliverySeconds: map[string]float64{},
	}
	var name string
	var n int
	var status Status
	var dstatus DeliveryStatus
	var age float64
	for _, q := range []struct {
		sql  string
		args []any
		scan []any
		each func()
	}{
		{statsClaimsSQL,
			[]any{window.Seconds()}, []any{&name, &status, &n}, func() { countIn(st.Claims, name)[status] = n }},
		{statsDeliveriesSQL,
			[]any{window.Seconds()}, []any{&name, &dstatus, &n}, func() { countIn(st.Deliveries, name)[dstatus] = n }},
		{statsOldestClaimSQL,
			nil, []any{&name, &age}, func() { st.OldestClaimSeconds[name] = age }},
		{statsOldestDeliverySQL,
			nil, []any{&name, &age}, func() { st.OldestDeliverySeconds[name] = age }},
	} {
		rows, err := s.db.Query(ctx, q.sql, append([]any{planEach}, q.args...)...)
		if err != nil {
			return Stats{}, fmt.Errorf("reading the stats: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, q.scan, func() error { q.each(); return nil }); err != nil {
			return Stats{}, fmt.Errorf("reading the stats: %w", err)
		}
	}
	return st, nil
}

// planEach, as a query's first argument, has pgx send the statement
// unprepared, so that Postgres plans it for each read's own window: the
// reads of a window are run again and again with other windows, and a
// prepared statement's generic plan cannot see the window. After five
// reads of a day covering most of the claims (a sequential scan), Postgres
// kept a generic sequential scan of the claims, and the stats of the last
// hour read every claim (TestWindowReadsArePlannedForTheirWindow). Planning
// these statements costs a fraction of a millisecond.
const planEach = pgx.QueryExecModeExec

// countIn returns the counts of name in m, adding them when absent.
func countIn[S ~string](m map[string]map[S]int, name string) map[S]int {
	c, ok := m[name]
	if !ok {
		c = map[S]int{}
		m[name] = c
	}
	return c
}
