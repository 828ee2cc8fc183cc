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
	// Deliveries counts, by route and status, the deliveries of the
	// claims first seen within the window.
	Deliveries map[string]map[DeliveryStatus]int
	// OldestClaimSeconds is, by provider, how many seconds ago the
	// provider's oldest claim still processing was first seen, whenever
	// that was; a provider with none is absent.
	OldestClaimSeconds map[string]float64
	// OldestDeliverySeconds is, by route, how many seconds ago the claim
	// of the route's oldest delivery still processing was first seen,
	// whenever that was; a route with none is absent.
	OldestDeliverySeconds map[string]float64
}

// The statements of Stats, in the order it runs them.
const (
	statsClaimsSQL = `SELECT provider, status, count(*) FROM webhook_event_claims
WHERE first_seen_at >= now() - make_interval(secs => $1) GROUP BY provider, status`
	statsDeliveriesSQL = `SELECT d.route, d.status, count(*) FROM webhook_event_claims c
JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE c.first_seen_at >= now() - make_interval(secs => $1) GROUP BY d.route, d.status`
	statsOldestClaimSQL = `SELECT provider, extract(epoch FROM now() - min(first_seen_at))::float8 FROM webhook_event_claims
WHERE status = 'processing' GROUP BY provider`
	statsOldestDeliverySQL = `SELECT d.route, extract(epoch FROM now() - min(c.first_seen_at))::float8 FROM webhook_deliveries d
JOIN webhook_event_claims c ON c.provider = d.provider AND c.event_id = d.event_id
WHERE d.status = 'processing' GROUP BY d.route`
)

// Stats counts claims and deliveries first seen within window, by
// provider and by route, through the first_seen_at index; the oldest
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
		rows, err := s.db.Query(ctx, q.sql, q.args...)
		if err != nil {
			return Stats{}, fmt.Errorf("reading the stats: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, q.scan, func() error { q.each(); return nil }); err != nil {
			return Stats{}, fmt.Errorf("reading the stats: %w", err)
		}
	}
	return st, nil
}

// countIn returns the counts of name in m, adding them when absent.
func countIn[S ~string](m map[string]map[S]int, name string) map[S]int {
	c, ok := m[name]
	if !ok {
		c = map[S]int{}
		m[name] = c
	}
	return c
}
