package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// A downstream that echoes the credentials it was sent, in every form it
// might, leaves no trace of them in the delivery's last_error, the worker's
// log, or what claims show and claims export print.
func TestEchoedSecretNeverStoredOrLogged(t *testing.T) {
	t.Parallel()
	const token = "sk_live_51Hx9QpEchoed/Secret+Tok="
	db := dbtest.NewDB(t)
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		j, _ := json.Marshal(auth)
		// The first answer is retryable and the second final, so that both
		// the retry's and the failure's lines are written.
		code := http.StatusServiceUnavailable
		if calls.Add(1) > 1 {
			code = http.StatusUnauthorized
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `invalid credentials %s; token %s; q=%s; p=%s; json=%s; sig=%s`,
			auth, token, url.QueryEscape(auth), url.PathEscape(token), j, signingSecret)
	}))
	t.Cleanup(down.Close)
	cfgPath := appendConfig(t, writeConfig(t, down.URL), "    secret_headers: {Authorization: T_SHIP_AUTH}\n")
	env := workerEnv(db, cfgPath)
	env["T_SHIP_AUTH"] = "Bearer " + token
	worker := serveWorker(t, env)
	logs := worker.logs

	store := newStore(t, db)
	claimEvent(t, store, "evt_1", `{}`)
	waitStatus(t, store, "evt_1", claim.Failed, logs)
	worker.stop(t)
	require.EqualValues(t, 2, calls.Load())

	var lastError string
	require.NoError(t, db.Pool.QueryRow(t.Context(),
		`SELECT last_error FROM webhook_deliveries WHERE event_id = 'evt_1' AND route = 'ship'`).Scan(&lastError))
	require.Equal(t, "HTTP 401 Unauthorized", lastError, "no body text in the reason")
	require.Contains(t, logs.String(), "attempt failed; will retry")
	require.Contains(t, logs.String(), "delivery failed")

	var show, export bytes.Buffer
	cmdEnv := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfgPath})
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1"}, cmdEnv, &show, io.Discard))
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "export"}, cmdEnv, &export, io.Discard))
	require.Contains(t, show.String(), "HTTP 401 Unauthorized")

	key := signingSecret[len("whsec_"):]
	for name, out := range map[string]string{
		"last_error": lastError, "log": logs.String(), "claims show": show.String(), "claims export": export.String(),
	} {
		for _, secret := range []string{token, key} {
			for i := 0; i+6 <= len(secret); i++ {
				require.NotContains(t, out, secret[i:i+6], "%s holds a piece of a secret:\n%s", name, out)
			}
		}
	}
}

// The attempt history keeps no credential the route sends, however it
// sends it: an Authorization given as a plain headers: value (which no
// secret list names, so only its name redacts it) and a secret_headers
// value too short for the echo redactor (under 4 bytes) are both
// [redacted] in the request the store keeps and the operator API shows;
// a plain header that is no credential is kept as sent.
func TestRecordedRequestRedactsCredentialsByName(t *testing.T) {
	t.Parallel()
	const plainAuth, pin = "Bearer plain-tok-9f8e7d6c", "7q2"
	db := dbtest.NewDB(t)
	var seen atomic.Value
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Clone())
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(down.Close)
	cfgPath := appendConfig(t, writeConfig(t, down.URL), `    headers: {Authorization: "`+plainAuth+`", X-Tenant: acme}
    secret_headers: {X-Pin: T_SHIP_PIN}
console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
`)
	env := workerEnv(db, cfgPath)
	env["T_SHIP_PIN"] = pin
	worker := serveWorker(t, env)

	store := newStore(t, db)
	claimEvent(t, store, "evt_1", `{}`)
	waitStatus(t, store, "evt_1", claim.Completed, worker.logs)
	sent := seen.Load().(http.Header)
	require.Equal(t, plainAuth, sent.Get("Authorization"), "the downstream got the credentials")
	require.Equal(t, pin, sent.Get("X-Pin"))

	want := map[string][]string{"Authorization": {"[redacted]"}, "X-Pin": {"[redacted]"}, "X-Tenant": {"acme"}}
	all, err := store.Attempts(t.Context(), "stripe", "evt_1", true)
	require.NoError(t, err)
	require.Len(t, all["ship"], 1)
	got := all["ship"][0].Request
	require.NotNil(t, got)
	for name, v := range want {
		require.Equal(t, v, got.Headers[name], "stored %s", name)
	}

	detail := apiGetAs(t, "http://"+worker.addr, "alice", alicePassword, "/api/v1/claims/stripe/evt_1")
	var v struct {
		Deliveries []struct {
			Attempts []struct {
				Request *struct {
					Headers map[string][]string `json:"headers"`
				} `json:"request"`
			} `json:"attempts"`
		} `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(detail), &v), detail)
	require.Len(t, v.Deliveries, 1, detail)
	require.Len(t, v.Deliveries[0].Attempts, 1, detail)
	req := v.Deliveries[0].Attempts[0].Request
	require.NotNil(t, req, "an operator reads the request: %s", detail)
	for name, vals := range want {
		require.Equal(t, vals, req.Headers[name], "the API's %s", name)
	}
	require.NotContains(t, detail, "plain-tok")
}
