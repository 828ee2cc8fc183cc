package claim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// withCall is r with a history row for attempt n.
func withCall(r claim.AttemptResult, n, status int, response string) claim.AttemptResult {
	r.Call = &claim.Call{Attempt: n, StartedAt: time.Now(), Duration: 42 * time.Millisecond, Status: status, Response: &response}
	return r
}

// attemptRows counts the history rows of a stripe claim, and those that
// still hold a response.
func (b *bundle) attemptRows(t *testing.T, id string) (rows, responses int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `
SELECT count(*), count(response) FROM webhook_attempts WHERE provider = 'stripe' AND event_id = $1`, id).Scan(&rows, &responses))
	return rows, responses
}

// The history rows are written with the outcomes they go with, never for
// an attempt that was not recorded; retention clears their responses with
// the payload and deletes them with the claim.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	retry := claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "HTTP 503 Service Unavailable"}

	b.claimed(t, "evt_h", "ship", "mail")
	b.record(t, key("evt_h", "ship"), withCall(retry, 1, 503, "busy"))
	b.record(t, key("evt_h", "ship"), withCall(success, 2, 201, `{"id":"shp_1"}`))
	// Settled already: neither the outcome nor its row is written.
	err := b.store.RecordAttempt(t.Context(), key("evt_h", "ship"), withCall(success, 3, 200, "again"))
	require.ErrorIs(t, err, claim.ErrConflict)
	// A failure without a call writes no row.
	b.record(t, key("evt_h", "mail"), claim.AttemptResult{Status: claim.DeliveryFailed, Error: "route gone"})

	all, err := b.store.Attempts(t.Context(), "stripe", "evt_h", true)
	require.NoError(t, err)
	require.Len(t, all, 1)
	as := all["ship"]
	require.Len(t, as, 2)
	require.Equal(t, 1, as[0].Attempt)
	require.Equal(t, 503, *as[0].StatusCode)
	require.Equal(t, "HTTP 503 Service Unavailable", *as[0].Error)
	require.Equal(t, "busy", *as[0].Response)
	require.EqualValues(t, 42, as[0].DurationMS)
	require.Equal(t, 2, as[1].Attempt)
	require.Nil(t, as[1].Error)
	require.Equal(t, `{"id":"shp_1"}`, *as[1].Response)

	noResponses, err := b.store.Attempts(t.Context(), "stripe", "evt_h", false)
	require.NoError(t, err)
	for _, a := range noResponses["ship"] {
		require.Nil(t, a.Response)
	}

	var exported []claim.AttemptRecord
	require.NoError(t, b.store.Export(t.Context(), claim.Search{}, false, func(e *claim.Exported) error {
		for _, d := range e.Deliveries {
			if e.EventID == "evt_h" && d.Route == "ship" {
				exported = append(exported, d.Attempts...)
			}
		}
		return nil
	}))
	require.Len(t, exported, 2)
	require.Equal(t, 503, *exported[0].StatusCode)
	require.Nil(t, exported[0].Response, "export carries no responses")

	// Retention: the payload's clearing clears the responses, the claim's
	// deletion deletes the rows.
	b.claimed(t, "evt_keep", "ship")
	b.record(t, key("evt_keep", "ship"), withCall(success, 1, 200, "ok"))
	b.terminalAgo(t, "evt_h", mid)
	_, err = b.store.Prune(t.Context(), policy)
	require.NoError(t, err)
	rows, responses := b.attemptRows(t, "evt_h")
	require.Equal(t, 2, rows)
	require.Equal(t, 0, responses)
	rows, responses = b.attemptRows(t, "evt_keep")
	require.Equal(t, 1, rows)
	require.Equal(t, 1, responses, "a young claim keeps its responses")

	b.terminalAgo(t, "evt_h", old)
	res, err := b.store.Prune(t.Context(), policy)
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted)
	rows, _ = b.attemptRows(t, "evt_h")
	require.Equal(t, 0, rows, "deleted with the claim")
}

// Deleting claims deletes their attempt history, and nothing else's, in
// one lookup per claim through the history's index: the rows have no
// foreign key (migration 00016), a statement trigger on the claim table
// deletes them, and retention deletes claims a thousand at a time.
func TestAttemptHistoryLeavesWithItsClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tx := dbtest.Tx(t)
	const n = 2000
	seed := make([]*testfactory.ClaimOpts, n)
	var deliveries []claim.Key
	for i := range seed {
		id := fmt.Sprintf("evt_%d", i+1)
		seed[i] = &testfactory.ClaimOpts{EventID: id, Status: claim.Completed, Deliveries: map[string]*testfactory.DeliveryOpts{
			"ship": {Status: claim.DeliveryCompleted}, "ledger": {Status: claim.DeliveryCompleted}}}
		deliveries = append(deliveries, key(id, "ship"), key(id, "ledger"))
	}
	testfactory.Claims(ctx, t, tx, seed)
	ok := 200
	for a := 1; a <= 2; a++ {
		testfactory.Attempts(ctx, t, tx, deliveries, &testfactory.AttemptOpts{Attempt: a, StatusCode: &ok})
	}
	_, err := tx.Exec(ctx, `ANALYZE webhook_event_claims, webhook_deliveries, webhook_attempts`)
	require.NoError(t, err)
	var seqBefore int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(seq_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = 'webhook_attempts'`).Scan(&seqBefore))
	tag, err := tx.Exec(ctx, `DELETE FROM webhook_event_claims WHERE provider = 'stripe' AND event_id IN (SELECT 'evt_' || g FROM generate_series(1, $1::int) g)`, n/2)
	require.NoError(t, err)
	require.EqualValues(t, n/2, tag.RowsAffected())
	var seqAfter int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(seq_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = 'webhook_attempts'`).Scan(&seqAfter))
	require.Equal(t, seqBefore, seqAfter, "deleting claims scanned the whole attempt history")

	var gone, kept, keptDeliveries int
	require.NoError(t, tx.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM webhook_event_claims c WHERE c.provider = a.provider AND c.event_id = a.event_id)),
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM webhook_event_claims c WHERE c.provider = a.provider AND c.event_id = a.event_id)),
       (SELECT count(*) FROM webhook_deliveries)
FROM webhook_attempts a`).Scan(&gone, &kept, &keptDeliveries))
	require.Zero(t, gone, "history rows outlived their claims")
	require.Equal(t, n/2*2*2, kept, "the other claims' history rows are all kept")
	require.Equal(t, n/2*2, keptDeliveries)
}
