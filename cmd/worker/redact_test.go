package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
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
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
worker:
  concurrency: 2
  shutdown_timeout: 2s
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE]
routes:
  - name: ship
    provider: stripe
    events: ["*"]
    url: %s/ship
    max_attempts: 3
    backoff: {initial: 10ms, max: 50ms}
    signing_secret_env: T_SHIP_SIGNING
    secret_headers: {Authorization: T_SHIP_AUTH}
`, down.URL)), 0o600))
	env := map[string]string{
		"DATABASE_URL":    db.URL,
		"HOOKGATE_CONFIG": cfgPath,
		"T_STRIPE":        "whsec_stripe",
		"T_SHIP_SIGNING":  signingSecret,
		"T_SHIP_AUTH":     "Bearer " + token,
	}
	addr := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &proctest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"worker", "--listen", addr}, getenv(env), io.Discard, logs) }()
	proctest.WaitHealthy(t, "http://"+addr+"/healthz", done)

	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, jobs, func(string) int { return 3 })
	_, err = store.Claim(t.Context(), claim.Event{Provider: "stripe", ID: "evt_1", Type: "invoice.paid", Payload: []byte(`{}`)},
		[]string{"ship"}, true)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, _, err := store.Get(t.Context(), "stripe", "evt_1")
		require.NoError(c, err)
		require.Equal(c, claim.Failed, cl.Status)
	}, 30*time.Second, 20*time.Millisecond, "not failed:\n%s", logs)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not stop")
	}
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
