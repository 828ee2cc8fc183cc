package claim

import (
	"context"
	"fmt"
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

// substringIndex is migration 21's trigram index of event ids.
const substringIndex = "webhook_event_claims_event_id_substring_idx"

// trigramIndex reports whether idx is a trigram index of event ids: 21's,
// or 19's on the bare column, which it replaced.
func trigramIndex(idx string) bool {
	return idx == substringIndex || idx == "webhook_event_claims_event_id_trgm_idx"
}

// TestTrigramIndexServesOnlySubstrings plans, over claims whose ids share
// most of their trigrams (ord_0000001, ord_0000002, ...), the statements
// that find claims by id or join them to their deliveries: the stats, the
// overview's activity, a lookup by id alone and the claims list's other
// filters. None may read the trigram index, at the planner's costs nor
// when index scans look dearer than bitmap scans (as they did to the
// planner that chose it): each of its lookups by one id reads the posting
// lists of trigrams nearly every id holds. The substring filter uses it
// from three characters on, and not below, where it holds no trigram.
func TestTrigramIndexServesOnlySubstrings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	for _, q := range []string{
		`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, first_seen_at, completed_at)
SELECT 'shop', 'ord_' || lpad(g::text, 7, '0'), 'order.paid', CASE WHEN g % 100 = 0 THEN 'processing' ELSE 'completed' END,
       '{}', 'application/json', now() - make_interval(secs => 30000 - g), CASE WHEN g % 100 <> 0 THEN now() END
FROM generate_series(1, 30000) g`,
		`INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
SELECT provider, event_id, 'fulfil', status, completed_at FROM webhook_event_claims`,
		// As autovacuum would have: the trigram index's pending entries
		// into its tree, where the planner counts them at their cost.
		`SELECT gin_clean_pending_list('` + substringIndex + `')`,
		`ANALYZE webhook_event_claims, webhook_deliveries`,
	} {
		_, err := tx.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	since := time.Now().Add(-24 * time.Hour)
	statements := []struct {
		name string
		sql  string
		args []any
	}{
		{"stats: claims", statsClaimsSQL, []any{86400.0}},
		{"stats: deliveries", statsDeliveriesSQL, []any{86400.0}},
		{"stats: oldest claim", statsOldestClaimSQL, nil},
		{"stats: oldest delivery", statsOldestDeliverySQL, nil},
		{"activity", routeActivitySQL, []any{since, 3600.0, 24}},
		{"a claim by id alone", `SELECT first_seen_at FROM webhook_event_claims WHERE event_id = $1`, []any{"ord_0012345"}},
	}
	for _, f := range []Search{{EventIDContains: "5"}, {EventIDContains: "05"}, {EventIDPrefix: "ord_001"}, {Route: "fulfil"}} {
		sql, args := searchSQL(f)
		statements = append(statements, struct {
			name string
			sql  string
			args []any
		}{fmt.Sprintf("search %+v", f), sql, args})
	}
	for _, bitmaps := range []bool{false, true} {
		if bitmaps {
			_, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off; SET LOCAL enable_indexonlyscan = off`)
			require.NoError(t, err)
		}
		for _, s := range statements {
			for _, sc := range planScans(t, tx, s.sql, s.args...) {
				require.Falsef(t, trigramIndex(sc.Index), "%s (bitmap scans only: %v) reads %s", s.name, bitmaps, sc.Index)
			}
		}
	}

	_, err := tx.Exec(ctx, `RESET enable_indexscan; RESET enable_indexonlyscan`)
	require.NoError(t, err)
	sql, args := searchSQL(Search{EventIDContains: "0012345"})
	scans := planScans(t, tx, sql, args...)
	require.Truef(t, slices.ContainsFunc(scans, func(sc scan) bool { return sc.Index == substringIndex }),
		"a rare substring is found through %s: %v", substringIndex, scans)
}
