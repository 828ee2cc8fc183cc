package claim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// createdIndex is migration 26's BRIN index of the deliveries' created_at.
const createdIndex = "webhook_deliveries_created_brin_idx"

// TestDeliveryCountsReadTheCreatedIndex plans, over thirty days of
// deliveries (a day's window is a thirtieth of them), the statements of
// the stats and the overview that count deliveries: the stats' counts and
// the activity read the deliveries through the BRIN index of created_at,
// and none of the three, nor the oldest processing delivery's age, reads
// the claim table: a join to the window's claims read all of them and
// their deliveries by a hash join, seconds over a day of 1,000,000. As
// the custom plans of a statement's first runs and as the generic plan
// Postgres may keep for the console's prepared statements after them.
func TestDeliveryCountsReadTheCreatedIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	for _, q := range []string{
		// 60,000 claims, one every 43.2 s over thirty days, each with a
		// delivery made with it, as the claim statement makes them.
		`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, first_seen_at, completed_at)
SELECT 'shop', 'ord_' || lpad(g::text, 7, '0'), 'order.paid', CASE WHEN g % 100 = 0 THEN 'processing' ELSE 'completed' END,
       '{}', 'application/json', now() - make_interval(secs => (60000 - g) * 43.2), CASE WHEN g % 100 <> 0 THEN now() END
FROM generate_series(1, 60000) g`,
		`INSERT INTO webhook_deliveries (provider, event_id, route, status, created_at, completed_at)
SELECT provider, event_id, 'fulfil', status, first_seen_at, completed_at FROM webhook_event_claims ORDER BY first_seen_at`,
		// As vacuum would have: the index's ranges summarized.
		`SELECT brin_summarize_new_values('` + createdIndex + `')`,
		`ANALYZE webhook_event_claims, webhook_deliveries`,
	} {
		_, err := tx.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	since := time.Now().Add(-24 * time.Hour)
	for _, generic := range []bool{false, true} {
		if generic {
			_, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
			require.NoError(t, err)
		}
		for _, s := range []struct {
			name    string
			sql     string
			args    []any
			indexed bool
		}{
			{"stats: deliveries", statsDeliveriesSQL, []any{86400.0}, true},
			{"activity", routeActivitySQL, []any{since, 3600.0, 24}, true},
			{"stats: oldest delivery", statsOldestDeliverySQL, nil, false},
		} {
			scans := planScans(t, tx, s.sql, s.args...)
			for _, sc := range scans {
				require.NotEqualf(t, "webhook_event_claims", sc.Relation, "%s (generic plan: %v) reads the claims: %v", s.name, generic, scans)
			}
			if s.indexed {
				require.Truef(t, slices.ContainsFunc(scans, func(sc scan) bool { return sc.Index == createdIndex }),
					"%s (generic plan: %v) does not use %s: %v", s.name, generic, createdIndex, scans)
			}
		}
	}
}

// TestWindowReadsArePlannedForTheirWindow: the stats', the status
// counts' and the activity's statements are planned for each read's own
// window, never kept prepared on the session. A prepared statement's
// generic plan cannot see the window: after five reads of a day that
// covers most of the table (a sequential scan), Postgres kept a generic
// sequential scan of the claims, and the stats of the last hour over a
// day of 1,000,000 claims read all of them (186 ms, where the hour's
// claims take a few).
func TestWindowReadsArePlannedForTheirWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	s := NewStore(tx, nil, nil)
	since := time.Now().Add(-24 * time.Hour)
	for range 7 {
		_, err := s.Stats(ctx, 24*time.Hour)
		require.NoError(t, err)
		_, err = s.StatusCounts(ctx, since)
		require.NoError(t, err)
		_, err = s.RouteActivity(ctx, since, time.Hour, 24)
		require.NoError(t, err)
	}
	var kept []string
	rows, err := tx.Query(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement = ANY ($1)`,
		[]string{statsClaimsSQL, statsDeliveriesSQL, statsOldestClaimSQL, statsOldestDeliverySQL, statusCountsSQL, routeActivitySQL})
	require.NoError(t, err)
	for rows.Next() {
		var st string
		require.NoError(t, rows.Scan(&st))
		kept = append(kept, st)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, kept, "statements kept prepared on the session")
}
