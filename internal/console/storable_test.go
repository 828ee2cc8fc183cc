package console_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestUnstorableInputIs400: text Postgres cannot store (a NUL, bytes that
// are not UTF-8) in a path segment, a filter, a cursor or a retry body of
// the API or the console's pages is a 400 that names the field, never a
// 500 with an ERROR in the log (SQLSTATE 22021).
func TestUnstorableInputIs400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1"})
	cursor := func(p, id string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-12-01T00:00:00Z","p":"` + p + `","e":"` + id + `"}`))
	}
	for _, tt := range []struct {
		method, path string
		body         any
		want         string
	}{
		{http.MethodGet, "/api/v1/claims/stripe/evt%00_1", nil, "event_id: must be UTF-8 text without NUL bytes"},
		{http.MethodGet, "/api/v1/claims/stripe/evt%FF_1", nil, "event_id: must be UTF-8"},
		{http.MethodGet, "/api/v1/claims/str%00ipe/evt_1", nil, "provider: must be UTF-8"},
		{http.MethodPost, "/api/v1/claims/stripe/evt%00_1/retry", nil, "event_id: must be UTF-8"},
		{http.MethodPost, "/api/v1/claims/%C3/evt_1/retry", nil, "provider: must be UTF-8"},
		{http.MethodPost, "/api/v1/routes/sh%00ip/pause", nil, "name: must be UTF-8"},
		{http.MethodPost, "/api/v1/routes/sh%FFip/resume", nil, "name: must be UTF-8"},
		{http.MethodPost, "/api/v1/routes/sh%00ip/breaker/close", nil, "name: must be UTF-8"},
		{http.MethodPost, "/api/v1/routes/sh%FFip/breaker/close", nil, "name: must be UTF-8"},
		{http.MethodGet, "/api/v1/claims?business_key=k%00", nil, "business_key: must be UTF-8"},
		{http.MethodGet, "/api/v1/claims?business_key=k%FF", nil, "business_key: must be UTF-8"},
		{http.MethodGet, "/api/v1/claims?event_id=evt%FF", nil, "event_id: must be UTF-8"},
		{http.MethodGet, "/api/v1/claims?cursor=" + cursor("stripe", `evt\u0000`), nil, "cursor: not one this API handed out"},
		{http.MethodGet, "/api/v1/claims?cursor=" + cursor(`str\u0000`, "evt_1"), nil, "cursor: not one this API handed out"},
		{http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": true, "business_key": "k\x00"}, "business_key: must be UTF-8"},
		{http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": false, "event_id": "evt\x00"}, "event_id: must be UTF-8"},
	} {
		status, body := e.call(t, alice, tt.method, tt.path, tt.body, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", tt.method, tt.path, body)
		require.Contains(t, body, `{"error":"`+tt.want, tt.path)
	}

	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	for _, tt := range []struct {
		method, path string
		form         url.Values
		want         string
	}{
		{http.MethodGet, "/console/claims/stripe/evt%00_1", nil, "event_id: must be UTF-8"},
		{http.MethodGet, "/console/claims/stripe/evt%FF_1/retry", nil, "event_id: must be UTF-8"},
		{http.MethodPost, "/console/claims/stripe/evt%00_1/retry", url.Values{}, "event_id: must be UTF-8"},
		{http.MethodGet, "/console/claims?business_key=k%00", nil, "business_key: must be UTF-8"},
		{http.MethodGet, "/console/claims?event_id=e%FF", nil, "event_id: must be UTF-8"},
		{http.MethodGet, "/console/claims?cursor=" + cursor("stripe", `evt\u0000`), nil, "cursor: not one this API handed out"},
		{http.MethodPost, "/console/routes/sh%00ip/pause", url.Values{}, "name: must be UTF-8"},
		{http.MethodPost, "/console/routes/sh%FFip/resume", url.Values{}, "name: must be UTF-8"},
		{http.MethodGet, "/console/routes/sh%00ip/pause", nil, "name: must be UTF-8"},
		{http.MethodGet, "/console/routes/sh%FFip/pause", nil, "name: must be UTF-8"},
		{http.MethodPost, "/console/routes/sh%00ip/breaker/close", url.Values{}, "name: must be UTF-8"},
		{http.MethodPost, "/console/routes/sh%FFip/breaker/close", url.Values{}, "name: must be UTF-8"},
	} {
		resp, body := b.do(t, tt.method, tt.path, tt.form)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", tt.method, tt.path, body)
		require.Contains(t, body, tt.want, tt.path)
	}
	require.NotContains(t, e.logs.String(), `"level":"ERROR"`)
	require.NotContains(t, e.logs.String(), "22021")
}
