package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
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
	require.NoError(t, b.store.Export(t.Context(), claim.ExportFilter{}, func(e *claim.Exported) error {
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
