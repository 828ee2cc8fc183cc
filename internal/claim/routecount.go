package claim

import (
	"context"
	"fmt"
	"strings"
)

// RouteCount is how many of the claims a search matches have a failed
// delivery to one route.
type RouteCount struct {
	Route  string
	Claims int
}

// CountFailedByRoute counts, by route, the claims f matches (After, Newer
// and Limit aside) that have a failed delivery to it, most first: what a
// bulk retry of them would send again where. A claim failed on two routes
// counts on both.
func (s *Store) CountFailedByRoute(ctx context.Context, f Search) ([]RouteCount, error) {
	f.After, f.Newer = nil, nil
	var params []any
	where := append(searchWhere(f, &params), "d.status = 'failed'")
	rows, err := s.db.Query(ctx, `SELECT d.route, count(*) FROM webhook_event_claims c
    JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE `+strings.Join(where, " AND ")+`
GROUP BY d.route ORDER BY count(*) DESC, d.route`, params...)
	if err != nil {
		return nil, fmt.Errorf("counting failed claims by route: %w", err)
	}
	defer rows.Close()
	var out []RouteCount
	for rows.Next() {
		var rc RouteCount
		if err := rows.Scan(&rc.Route, &rc.Claims); err != nil {
			return nil, fmt.Errorf("counting failed claims by route: %w", err)
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting failed claims by route: %w", err)
	}
	return out, nil
}
