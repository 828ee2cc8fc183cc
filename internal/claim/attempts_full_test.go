package claim_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// withFullCall is withCall with what was sent, the answer's headers and
// the attempt's place in its run.
func withFullCall(r claim.AttemptResult, n, status int, response string) claim.AttemptResult {
	r = withCall(r, n, status, response)
	r.Call.Request = &claim.SentRequest{Method: "POST", URL: "https://ship.example/v1/orders",
		Headers: map[string][]string{"Authorization": {"[redacted]"}, "Hookgate-Attempt": {fmt.Sprint(n)}}}
	r.Call.ResponseHeaders = map[string][]string{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}
	r.Call.RunAttempt, r.Call.RunMax = 1, 2
	return r
}

// An attempt's request and answer headers are kept in its history row,
// read only when asked for in full (what operators see), and cleared by
// retention with the response.
func TestAttemptHistoryKeepsEachAttemptInFull(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	retry := claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "HTTP 503 Service Unavailable"}
	b.claimed(t, "evt_full", "ship")
	b.record(t, key("evt_full", "ship"), withFullCall(retry, 3, 503, "busy"))

	full, err := b.store.Attempts(t.Context(), "stripe", "evt_full", true)
	require.NoError(t, err)
	a := full["ship"][0]
	require.Equal(t, &claim.SentRequest{Method: "POST", URL: "https://ship.example/v1/orders",
		Headers: map[string][]string{"Authorization": {"[redacted]"}, "Hookgate-Attempt": {"3"}}}, a.Request)
	require.Equal(t, map[string][]string{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}, a.ResponseHeaders)
	require.Equal(t, 1, *a.RunAttempt)
	require.Equal(t, 2, *a.RunMax)

	brief, err := b.store.Attempts(t.Context(), "stripe", "evt_full", false)
	require.NoError(t, err)
	v := brief["ship"][0]
	require.Nil(t, v.Request)
	require.Nil(t, v.ResponseHeaders)
	require.Nil(t, v.Response)
	require.Equal(t, 1, *v.RunAttempt, "the attempt's place is no secret")

	b.record(t, key("evt_full", "ship"), withFullCall(success, 4, 200, "ok"))
	b.terminalAgo(t, "evt_full", mid)
	_, err = b.store.Prune(t.Context(), policy)
	require.NoError(t, err)
	var requests, headers int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT count(request), count(response_headers) FROM webhook_attempts
WHERE provider = 'stripe' AND event_id = 'evt_full'`).Scan(&requests, &headers))
	require.Equal(t, [2]int{0, 0}, [2]int{requests, headers}, "cleared with the payload")
}

// A delivery that completes clears the last error of its failed attempts,
// and so does its claim; the history keeps them.
func TestCompletionClearsLastError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	retry := claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "HTTP 503 Service Unavailable"}
	b.claimed(t, "evt_clears", "ship", "mail")
	b.record(t, key("evt_clears", "ship"), withCall(retry, 1, 503, "busy"))
	b.record(t, key("evt_clears", "mail"), withCall(retry, 1, 502, "busy"))
	c, ds := b.get(t, "evt_clears")
	require.Equal(t, "HTTP 503 Service Unavailable", ds["ship"].LastError)
	require.NotEmpty(t, c.LastError)

	b.record(t, key("evt_clears", "ship"), withCall(success, 2, 200, "ok"))
	c, ds = b.get(t, "evt_clears")
	require.Empty(t, ds["ship"].LastError, "completed")
	require.Equal(t, "HTTP 503 Service Unavailable", ds["mail"].LastError, "still retrying")
	require.NotEmpty(t, c.LastError, "the claim is not completed yet")

	b.record(t, key("evt_clears", "mail"), withCall(success, 2, 200, "ok"))
	c, ds = b.get(t, "evt_clears")
	require.Equal(t, claim.Completed, c.Status)
	require.Empty(t, c.LastError)
	require.Empty(t, ds["mail"].LastError)
	as, err := b.store.Attempts(t.Context(), "stripe", "evt_clears", false)
	require.NoError(t, err)
	require.Equal(t, "HTTP 503 Service Unavailable", *as["ship"][0].Error, "the history keeps the failure")
}
