package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// A downstream that answers a failure with what it was sent (a card
// number) leaves that text only in the attempt's response, which operators
// read: a delivery's last_error and the attempts' error carry the status
// line alone, for viewers and operators, in the API, the console's pages
// and `claims show`.
func TestViewersReadNoDownstreamText(t *testing.T) {
	t.Parallel()
	const card = "4242424242424242"
	db := dbtest.NewDB(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, "card %s declined\nmore", card)
	}))
	t.Cleanup(down.Close)
	cfg := appendConfig(t, writeConfig(t, down.URL), `console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
    - name: bob
      role: viewer
      password_env: T_BOB
`)
	env := workerEnv(db, cfg)
	env["T_BOB"] = "bob-password-0002"
	addr, logs := startWorker(t, env)
	base := "http://" + addr

	store := newStore(t, db)
	claimEvent(t, store, "evt_1", `{}`)
	waitStatus(t, store, "evt_1", claim.Failed, logs)

	var lastError, attemptError, response string
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT d.last_error, a.error, a.response
FROM webhook_deliveries d JOIN webhook_attempts a USING (provider, event_id, route)
WHERE d.event_id = 'evt_1'`).Scan(&lastError, &attemptError, &response))
	require.Equal(t, "HTTP 422 Unprocessable Entity", lastError, "the status line, no body text")
	require.Equal(t, "HTTP 422 Unprocessable Entity", attemptError)
	require.Contains(t, response, card, "the body stays in the attempt's response")

	apiGet := func(user, pass, path string) string { return apiGetAs(t, base, user, pass, path) }
	pageGet := func(user, pass, path string) string { return pageGetAs(t, base, user, pass, path) }
	for _, who := range []struct{ user, pass string }{{"bob", env["T_BOB"]}, {"alice", alicePassword}} {
		for _, path := range []string{"/api/v1/claims", "/api/v1/claims?status=failed"} {
			body := apiGet(who.user, who.pass, path)
			require.Contains(t, body, `"last_error":"HTTP 422 Unprocessable Entity"`, who.user)
			require.NotContains(t, body, card, who.user)
		}
		detail := apiGet(who.user, who.pass, "/api/v1/claims/stripe/evt_1")
		require.Contains(t, detail, `"error":"HTTP 422 Unprocessable Entity"`, who.user)
		require.Equal(t, who.user == "alice", strings.Contains(detail, card), "only an operator reads the response: %s", detail)
		for _, path := range []string{"/console/claims", "/console/claims/stripe/evt_1"} {
			page := pageGet(who.user, who.pass, path)
			require.Contains(t, page, "HTTP 422 Unprocessable Entity", who.user+" "+path)
			require.NotContains(t, page, "Entity: card", who.user+" "+path)
			// An operator's claim page shows the attempt's response; no
			// other page, and nothing a viewer reads, holds the answer.
			require.Equal(t, who.user == "alice" && path != "/console/claims", strings.Contains(page, card), who.user+" "+path)
		}
	}
	var show, showJSON bytes.Buffer
	cmdEnv := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfg})
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1"}, cmdEnv, &show, io.Discard))
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1", "--json"}, cmdEnv, &showJSON, io.Discard))
	for _, out := range []string{show.String(), showJSON.String()} {
		require.Contains(t, out, "HTTP 422 Unprocessable Entity")
		require.NotContains(t, out, card)
	}
	require.NotContains(t, logs.String(), card, "nor in the worker's log")
}

// apiGetAs reads path on the worker at base with user's Basic credentials,
// and requires a 200.
func apiGetAs(t *testing.T, base, user, pass, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

// pageGetAs signs user in to the console at base and reads the page at
// path, requiring a 200.
func pageGetAs(t *testing.T, base, user, pass, path string) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/console/sign-in", url.Values{"name": {user}, "password": {pass}})
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = c.Get(base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}
