package ingest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
)

const handlerSecret = "whsec_ingest_handler_test"

const testConfig = `
ingest:
  max_body_bytes: 1024
  claim_timeout: 2s
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE]
routes:
  - name: ship
    provider: stripe
    events: ["invoice.*"]
    url: http://127.0.0.1:1/ship
`

type bundle struct {
	db      claim.DB
	store   *claim.Store
	handler http.Handler
	logs    *bytes.Buffer
	srv     *ingest.Server
}

// setup builds the server as cmd/ingest wires it, over a store in a
// rolled-back transaction, without a listener: requests go straight to its
// handler, one at a time.
func setup(t *testing.T) *bundle {
	t.Helper()
	tx := dbtest.Tx(t)
	return build(t, tx, tx.Conn())
}

// build builds the server over db, which ping checks for /readyz.
func build(t *testing.T, db claim.DB, ping ingest.Pinger) *bundle {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	require.NoError(t, err)
	secrets, err := cfg.ResolveSecrets(func(k string) string { return map[string]string{"T_STRIPE": handlerSecret}[k] })
	require.NoError(t, err)
	jobs, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db, jobs, cfg.MaxAttempts)
	logs := &bytes.Buffer{}
	table, err := route.New(cfg, secrets.Headers)
	require.NoError(t, err)
	// One claim transaction at a time: db may be a test's transaction.
	claims := ingest.NewGroup(store, ingest.GroupOptions{Concurrency: 1})
	srv, err := ingest.New(cfg, table, secrets, claims, ping, slog.New(slog.NewJSONHandler(logs, nil)), prometheus.NewRegistry())
	require.NoError(t, err)
	return &bundle{db: db, store: store, handler: srv.Handler(), logs: logs, srv: srv}
}

// serve sends one request to the handler and returns the status and body.
func (b *bundle) serve(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	require.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0])
	return rec.Code, body
}

func stripeRequest(provider, id, secret string) *http.Request {
	body := []byte(`{"id": "` + id + `", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+provider, bytes.NewReader(body))
	req.Header.Set("Stripe-Signature", sp.Header)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func withContentType(r *http.Request, v string) *http.Request {
	r.Header.Set("Content-Type", v)
	return r
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("NewEventThenDuplicate", func(t *testing.T) {
		status, body := b.serve(t, stripeRequest("stripe", "evt_1", handlerSecret))
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, map[string]any{"received": true, "duplicate": false}, body)
		c, ds, err := b.store.Get(t.Context(), "stripe", "evt_1")
		require.NoError(t, err)
		require.Equal(t, claim.Processing, c.Status)
		require.Len(t, ds, 1)

		status, body = b.serve(t, stripeRequest("stripe", "evt_1", handlerSecret))
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, map[string]any{"received": true, "duplicate": true}, body)
	})

	for _, tt := range []struct {
		name   string
		req    *http.Request
		status int
		error  string
	}{
		{"UnknownProvider", stripeRequest("paypal", "evt_2", handlerSecret), http.StatusNotFound, "unknown provider"},
		{"WrongSecret", stripeRequest("stripe", "evt_3", "whsec_other"), http.StatusUnauthorized, "signature does not match any configured secret"},
		{"TooLarge", func() *http.Request {
			r := stripeRequest("stripe", "evt_4", handlerSecret)
			r.Body, r.ContentLength = http.NoBody, 2048
			return r
		}(), http.StatusRequestEntityTooLarge, "request body exceeds the configured limit"},
		{"TooLargeChunked", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(strings.Repeat("x", 2048)))
			r.ContentLength = -1
			return r
		}(), http.StatusRequestEntityTooLarge, "request body exceeds the configured limit"},
		// Signed, but with a Content-Type no text column can hold: refused
		// for what it is, never a 503 that every retry would meet again.
		{"ContentTypeNotUTF8", withContentType(stripeRequest("stripe", "evt_5", handlerSecret), "\xff"),
			http.StatusBadRequest, "Content-Type header must be at most 256 bytes of printable ASCII"},
		{"ContentTypeNUL", withContentType(stripeRequest("stripe", "evt_6", handlerSecret), "application/json\x00"),
			http.StatusBadRequest, "Content-Type header must be at most 256 bytes of printable ASCII"},
		{"ContentTypeTooLong", withContentType(stripeRequest("stripe", "evt_7", handlerSecret), "application/json; x="+strings.Repeat("a", 256)),
			http.StatusBadRequest, "Content-Type header must be at most 256 bytes of printable ASCII"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := b.serve(t, tt.req)
			require.Equal(t, tt.status, status)
			require.Equal(t, map[string]any{"error": tt.error}, body)
		})
	}

	t.Run("RejectedRequestsClaimNothing", func(t *testing.T) {
		claims, err := b.store.SearchClaims(t.Context(), claim.Search{})
		require.NoError(t, err)
		require.Len(t, claims, 1, "only evt_1")
	})

	t.Run("ContentTypeWithParametersIsKept", func(t *testing.T) {
		const ct = "application/json; charset=utf-8"
		status, _ := b.serve(t, withContentType(stripeRequest("stripe", "evt_ct", handlerSecret), ct))
		require.Equal(t, http.StatusOK, status)
		var got string
		require.NoError(t, b.db.QueryRow(t.Context(), `SELECT content_type FROM webhook_event_claims
WHERE provider = 'stripe' AND event_id = 'evt_ct'`).Scan(&got))
		require.Equal(t, ct, got, "stored as received, to be forwarded")
	})
}

// TestDatabaseDown closes the pool under the server: the claim cannot
// commit, so the provider hears 503 and to retry, without the cause.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	b := build(t, db.Pool, db.Pool)
	db.Pool.Close()

	status, body := b.serve(t, stripeRequest("stripe", "evt_down", handlerSecret))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, map[string]any{"error": "event could not be recorded; retry later"}, body)
	require.Contains(t, b.logs.String(), `"status":503`, "the cause is logged")

	status, body = b.serve(t, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, map[string]any{"error": "database unreachable"}, body)

	status, _ = b.serve(t, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, status, "liveness does not depend on the database")
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, body := b.serve(t, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]any{"status": "ready"}, body)
}

// Past the budget, accepted requests are counted, not logged, and the count
// is logged with the first request of a later second; a refused request is
// always logged.
func TestRequestLinesAreSampled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	b.srv.SetLineBudget(2, func() time.Time { return now })
	for i := range 4 {
		status, _ := b.serve(t, stripeRequest("stripe", fmt.Sprintf("evt_sampled_%d", i), handlerSecret))
		require.Equal(t, http.StatusOK, status)
	}
	status, _ := b.serve(t, stripeRequest("stripe", "evt_forged", "whsec_wrong"))
	require.Equal(t, http.StatusUnauthorized, status)
	lines := func(msg string) []map[string]any {
		var out []map[string]any
		for line := range strings.Lines(b.logs.String()) {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if m["msg"] == msg {
				out = append(out, m)
			}
		}
		return out
	}
	require.Len(t, lines("webhook"), 3, "two accepted requests within the budget, and the refused one")
	require.Empty(t, lines("webhook lines over the budget were counted, not written"))

	now = now.Add(time.Second)
	status, _ = b.serve(t, stripeRequest("stripe", "evt_sampled_next", handlerSecret))
	require.Equal(t, http.StatusOK, status)
	summary := lines("webhook lines over the budget were counted, not written")
	require.Len(t, summary, 1)
	require.EqualValues(t, 2, summary[0]["not_logged"])
	require.Equal(t, map[string]any{"claimed": float64(2)}, summary[0]["by_result"])
	require.Len(t, lines("webhook"), 4, "a new second's first line")
}
