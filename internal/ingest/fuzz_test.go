package ingest_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	stripeSecret = "whsec_fuzz_stripe"
	hmacSecret   = "fuzz-hmac-secret"
)

var swSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("fuzz standard webhooks key 32byt"))

const fuzzConfig = `
ingest:
  max_body_bytes: 8192
providers:
  - {name: stripe, scheme: stripe, secrets_env: [F_STRIPE]}
  - {name: github, scheme: github, secrets_env: [F_HMAC]}
  - {name: shop, scheme: shopify, secrets_env: [F_HMAC]}
  - {name: sw, scheme: standard-webhooks, secrets_env: [F_SW]}
  - {name: acme, scheme: hmac, secrets_env: [F_HMAC], header: X-Acme-Signature, prefix: "sha256=",
     encoding: hex, id_from: "json:event.id", type_from: "json:event.type"}
routes:
  - {name: all-stripe, provider: stripe, events: ["*"], url: "http://127.0.0.1:1/s"}
  - {name: push, provider: github, events: ["push"], url: "http://127.0.0.1:1/g"}
  - {name: orders, provider: shop, events: ["orders/*"], url: "http://127.0.0.1:1/o"}
  - {name: all-sw, provider: sw, events: ["*"], url: "http://127.0.0.1:1/w"}
  - {name: all-acme, provider: acme, events: ["*"], url: "http://127.0.0.1:1/a"}
`

func macOf(body []byte) []byte {
	m := hmac.New(sha256.New, []byte(hmacSecret))
	m.Write(body)
	return m.Sum(nil)
}

// headerText writes h one "Name: value" per line, as the fuzz input holds it.
func headerText(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	return b.String()
}

// FuzzWebhook drives the whole ingest handler, real claim store and
// Postgres behind it, with arbitrary methods, provider segments, headers and
// bodies, seeded with genuine signed requests of every scheme. Whatever the
// input: the answer is one of the contract's statuses with a JSON body; an
// error body names no secret, SQL or stack; a 200 means a claim of that
// provider holding exactly those bytes is committed; any other answer
// commits nothing.
func FuzzWebhook(f *testing.F) {
	db := dbtest.NewDB(f)
	cfg, err := config.Parse([]byte(fuzzConfig))
	require.NoError(f, err)
	secrets, err := cfg.ResolveSecrets(func(k string) string {
		return map[string]string{"F_STRIPE": stripeSecret, "F_HMAC": hmacSecret, "F_SW": swSecret}[k]
	})
	require.NoError(f, err)
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(f, err)
	store := claim.NewStore(db.Pool, jobs, cfg.MaxAttempts)
	table, err := route.New(cfg, secrets.Headers)
	require.NoError(f, err)
	srv, err := ingest.New(cfg, table, secrets, ingest.NewGroup(store, ingest.GroupOptions{}), db.Pool, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(f, err)
	handler := srv.Handler()

	now := time.Now()
	stripeBody := []byte(`{"id": "evt_fuzz", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stripeBody, Secret: stripeSecret, Timestamp: now})
	f.Add("POST", "stripe", headerText(http.Header{"Stripe-Signature": {sp.Header}, "Content-Type": {"application/json"}}), stripeBody)

	ghBody, err := os.ReadFile("../verify/testdata/github_push.json")
	require.NoError(f, err)
	gh := http.Header{
		"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(macOf(ghBody))},
		"X-Github-Delivery":   {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"X-Github-Event":      {"push"},
	}
	f.Add("POST", "github", headerText(gh), ghBody)
	gh.Set("X-Github-Delivery", "replayed-under-a-new-id")
	f.Add("POST", "github", headerText(gh), ghBody)
	gh.Set("Content-Encoding", "gzip")
	f.Add("POST", "github", headerText(gh), ghBody)

	shopBody, err := os.ReadFile("../verify/testdata/shopify_orders_create.json")
	require.NoError(f, err)
	f.Add("POST", "shop", headerText(http.Header{
		"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(macOf(shopBody))},
		"X-Shopify-Event-Id":    {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
		"X-Shopify-Topic":       {"orders/create"},
	}), shopBody)

	swBody, err := os.ReadFile("../verify/testdata/standardwebhooks_invoice_paid.json")
	require.NoError(f, err)
	wh, err := standardwebhooks.NewWebhook(swSecret)
	require.NoError(f, err)
	sig, err := wh.Sign("msg_fuzz", now, swBody)
	require.NoError(f, err)
	f.Add("POST", "sw", headerText(http.Header{
		"Webhook-Id": {"msg_fuzz"}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig},
	}), swBody)
	f.Add("POST", "sw", "Webhook-Id: msg_fuzz\nWebhook-Signature: "+sig+"\n", swBody)

	acmeBodies := [][]byte{
		[]byte(`{"event": {"id": "a-1", "type": "thing.happened"}}`),
		[]byte(`{"event": {"id": "a-2", "type": "thing.happened"}, "Event": {"id": "a-3"}}`),
		[]byte(`{"event": {"id": "a-4", "ID": "a-5", "type": "x"}}`),
	}
	for _, b := range acmeBodies {
		f.Add("POST", "acme", "X-Acme-Signature: sha256="+hex.EncodeToString(macOf(b))+"\n", b)
	}
	f.Add("JUNK", "stripe", "", []byte("{}"))
	f.Add("POST", strings.Repeat("a", 4096), "", []byte("{}"))
	f.Add("POST", "nope", "Content-Length: 5\n", []byte("{}"))
	f.Add("GET", "stripe", "", []byte(nil))
	f.Add("POST", "stripe", "Stripe-Signature: t=1,v1=00\nContent-Encoding: \x01\n", []byte(`{"id":"x","id":"y"}`))

	allowed := map[int]bool{200: true, 400: true, 401: true, 404: true, 405: true, 413: true, 503: true}
	f.Fuzz(func(t *testing.T, method, provider, headers string, body []byte) {
		if !validMethod(method) {
			return // not a request a server can receive
		}
		h := http.Header{}
		for _, line := range strings.Split(headers, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && validHeaderName(k) {
				h.Add(k, strings.TrimSpace(v))
			}
		}
		ctx := context.Background()
		var before int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims`).Scan(&before))

		req := &http.Request{
			Method: method, URL: &url.URL{Path: "/webhooks/" + provider, RawPath: "/webhooks/" + url.PathEscape(provider)},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Host: "ingest.test",
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), RemoteAddr: "192.0.2.1:1234",
		}
		req = req.WithContext(ctx)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		require.True(t, allowed[rec.Code], "status %d: %s", rec.Code, rec.Body.String())
		var answer map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &answer), "every answer is JSON: %q", rec.Body.String())
		var after int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims`).Scan(&after))
		if rec.Code == http.StatusOK {
			require.Equal(t, true, answer["received"])
			var held int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE provider = $1 AND payload = $2`,
				provider, body).Scan(&held))
			require.Equal(t, 1, held, "a 200 means these bytes are claimed")
			return
		}
		require.Equal(t, before, after, "a %d commits nothing", rec.Code)
		msg, _ := answer["error"].(string)
		require.NotEmpty(t, msg)
		for _, leak := range []string{stripeSecret, hmacSecret, swSecret, "SELECT", "INSERT", "goroutine", "panic", ".go:"} {
			require.NotContains(t, msg, leak)
		}
	})
}

// validMethod reports whether m is an HTTP token, as a server would parse it.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderName reports whether k is a header name a server would accept.
func validHeaderName(k string) bool { return validMethod(k) }
