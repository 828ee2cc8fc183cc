package claim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestSearchNeverScansClaims plans the claims list of the operator API for
// each filter it offers, alone, with since, and after a cursor, over a
// table of analyzed claims of several providers, statuses and types: none
// may read the claim table by a sequential scan. A type glob and an event
// id prefix that few claims match must go through their prefix indexes:
// walking the newest-first index instead reads every claim to fill a page.
func TestSearchNeverScansClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	for _, q := range []string{
		`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, first_seen_at, completed_at)
SELECT (ARRAY['stripe', 'github', 'shopify', 'acme'])[g % 4 + 1], 'evt_' || g,
       CASE WHEN g % 1000 = 0 THEN 'charge.dispute.created'
            ELSE (ARRAY['invoice.paid', 'invoice.created', 'customer.updated', 'charge.refunded', 'push'])[g % 5 + 1] END,
       CASE WHEN g % 50 = 0 THEN 'failed' WHEN g % 70 = 0 THEN 'processing' WHEN g % 90 = 0 THEN 'ignored' ELSE 'completed' END,
       '{}', 'application/json', now() - make_interval(secs => g),
       CASE WHEN g % 50 <> 0 AND g % 70 <> 0 AND g % 90 <> 0 THEN now() END
FROM generate_series(1, 30000) g`,
		`INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
SELECT provider, event_id, 'ship', status, completed_at FROM webhook_event_claims WHERE status <> 'ignored'`,
		`INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
SELECT 'ship', sha256(convert_to('["cus_' || event_id || '"]', 'UTF8')), '["cus_' || event_id || '"]', provider, event_id
FROM webhook_event_claims`,
		`ANALYZE webhook_event_claims, webhook_deliveries, webhook_business_keys`,
	} {
		_, err := tx.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	since := time.Now().Add(-time.Hour)
	after := &Position{FirstSeenAt: time.Now().Add(-2 * time.Hour), Provider: "stripe", EventID: "evt_7200"}
	// The filters that few claims match, and the index each must use.
	wantIndex := map[string]string{
		"type glob, rare":   "webhook_event_claims_type_pattern_idx",
		"event id, one":     "webhook_event_claims_event_id_pattern_idx",
		"event id, a few":   "webhook_event_claims_event_id_pattern_idx",
		"status":            "webhook_event_claims_settled_seen_idx",
		"status ignored":    "webhook_event_claims_settled_seen_idx",
		"status processing": "webhook_event_claims_processing_idx",
		"status cursor":     "webhook_event_claims_settled_seen_idx",
	}
	for name, f := range map[string]Search{
		"type glob, rare":   {Type: "charge.dispute.*"},
		"event id, one":     {EventIDPrefix: "evt_12345"},
		"event id, a few":   {EventIDPrefix: "evt_2345"},
		"none":              {},
		"status":            {Status: Failed},
		"status ignored":    {Status: Ignored},
		"status processing": {Status: Processing},
		"status completed":  {Status: Completed},
		"provider":          {Provider: "acme"},
		"route":             {Route: "ship"},
		"type":              {Type: "charge.refunded"},
		"type glob":         {Type: "invoice.*"},
		"event id":          {EventIDPrefix: "evt_12"},
		"business key":      {BusinessKey: `["cus_1"]`},
		"before":            {Before: since},
		"all":               {Status: Failed, Provider: "stripe", Route: "ship", Type: "invoice.*", EventIDPrefix: "evt_1", BusinessKey: `["x"]`, Before: time.Now()},
		"status cursor":     {Status: Failed, After: after, Limit: 500},
	} {
		for _, withSince := range []bool{false, true} {
			if withSince {
				f.Since = since
			}
			sql, args := searchSQL(f)
			scans := planScans(t, tx, sql, args...)
			for _, scan := range scans {
				require.Falsef(t, scan.Type == "Seq Scan", "filter %s (since %v) scans %s", name, withSince, scan.Relation)
			}
			if idx := wantIndex[name]; idx != "" {
				require.Truef(t, slices.ContainsFunc(scans, func(s scan) bool { return s.Index == idx }),
					"filter %s (since %v) does not use %s: %v", name, withSince, idx, scans)
			}
		}
	}
}

// The statements that read failed or processing claims apart from the list
// (the routes' delivery counts, the failed claims a bulk retry pages
// through) find them through the partial indexes of those statuses, never
// by scanning the claim table, in the generic plan a prepared statement
// keeps: the statuses are literals, not arguments.
func TestStatusReadsUseTheirPartialIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	for _, q := range []string{
		`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, completed_at)
SELECT 'stripe', 'evt_' || g, 'invoice.paid',
       CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 150 = 0 THEN 'processing' ELSE 'completed' END,
       '{}', 'application/json', CASE WHEN g % 100 <> 0 AND g % 150 <> 0 THEN now() END
FROM generate_series(1, 30000) g`,
		`INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
SELECT provider, event_id, 'ship', status, completed_at FROM webhook_event_claims`,
		`ANALYZE webhook_event_claims, webhook_deliveries`,
		`SET LOCAL plan_cache_mode = force_generic_plan`,
	} {
		_, err := tx.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	for _, s := range []struct {
		name  string
		sql   string
		args  []any
		index []string
	}{
		{"routes' deliveries", routeDeliveriesSQL, []any{[]string{"ship"}},
			[]string{"webhook_event_claims_processing_idx", "webhook_event_claims_failed_updated_idx"}},
	} {
		scans := planScans(t, tx, s.sql, s.args...)
		for _, sc := range scans {
			require.Falsef(t, sc.Type == "Seq Scan" && sc.Relation == "webhook_event_claims", "%s scans the claim table: %v", s.name, scans)
		}
		for _, idx := range s.index {
			require.Truef(t, slices.ContainsFunc(scans, func(sc scan) bool { return sc.Index == idx }), "%s does not use %s: %v", s.name, idx, scans)
		}
	}
}
