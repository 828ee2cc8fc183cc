package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	stripeSecret = "whsec_test_stripe_secret"
	stripeOld    = "whsec_test_stripe_previous"
	githubSecret = "gh-secret"
	shopSecret   = "shop-secret"
	acmeSecret   = "acme-secret"
)

// swSecret is a Standard Webhooks secret: whsec_ + base64 of the key.
var swSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-webhooks-test-key-32byt"))

const testConfig = `
ingest:
  max_body_bytes: 65536
  claim_timeout: 2s
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE, T_STRIPE_OLD]
  - name: github
    scheme: github
    secrets_env: [T_GITHUB]
    on_failed_redelivery: ack
  - name: shop
    scheme: shopify
    secrets_env: [T_SHOP]
  - name: sw
    scheme: standard-webhooks
    secrets_env: [T_SW]
  - name: acme
    scheme: hmac
    secrets_env: [T_ACME]
    header: X-Acme-Signature
    prefix: "sha256="
    encoding: hex
    id_from: json:event.id
    type_from: header:X-Acme-Event
  - name: hooky
    scheme: hmac
    secrets_env: [T_ACME]
    header: X-Hooky-Signature
    encoding: base64
    id_from: header:X-Hooky-Id
    type_from: header:X-Hooky-Event
  - name: gh-open
    scheme: github
    secrets_env: [T_GITHUB]
    replay_guard: off
routes:
  - name: ship-order
    provider: stripe
    events: ["checkout.session.completed", "invoice.*"]
    url: http://127.0.0.1:1/ship
  - name: ledger
    provider: stripe
    events: ["invoice.*"]
    url: http://127.0.0.1:1/ledger
  - name: gh
    provider: github
    events: ["push"]
    url: http://127.0.0.1:1/gh
  - name: shop-orders
    provider: shop
    events: ["orders/*"]
    url: http://127.0.0.1:1/shop
  - name: sw-all
    provider: sw
    events: ["*"]
    url: http://127.0.0.1:1/sw
  - name: acme-all
    provider: acme
    events: ["*"]
    url: http://127.0.0.1:1/acme
  - name: hooky-all
    provider: hooky
    events: ["*"]
    url: http://127.0.0.1:1/hooky
  - name: gh-open-push
    provider: gh-open
    events: ["push"]
    url: http://127.0.0.1:1/gh-open
`

func testEnv(databaseURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL": databaseURL,
		"T_STRIPE":     stripeSecret,
		"T_STRIPE_OLD": stripeOld,
		"T_GITHUB":     githubSecret,
		"T_SHOP":       shopSecret,
		"T_SW":         swSecret,
		"T_ACME":       acmeSecret,
	}
}

// server is a running ingest, started through run as main would.
type server struct {
	base string
	pool *pgxpool.Pool
	logs *proctest.Buffer
	stop func() error
}

type bundle struct {
	*server
	db *dbtest.DB
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := dbtest.NewDB(t)
	return bundle{server: start(t, db.URL, nil), db: db}
}

// start runs ingest against databaseURL on a free port and waits for /healthz.
func start(t *testing.T, databaseURL string, override map[string]string) *server {
	t.Helper()
	return startWith(t, databaseURL, testConfig, override)
}

// startWith is start with a config of the test's own.
func startWith(t *testing.T, databaseURL, config string, override map[string]string) *server {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	env := testEnv(databaseURL)
	for k, v := range override {
		env[k] = v
	}
	addr := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &proctest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ingest", "--config", cfgPath, "--listen", addr},
			func(k string) string { return env[k] }, io.Discard, logs)
	}()
	s := &server{base: "http://" + addr, logs: logs}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() { require.NoError(t, s.stop()) })
	proctest.WaitHealthy(t, s.base+"/healthz", done)
	pool, err := pgxpool.New(context.Background(), databaseURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s.pool = pool
	return s
}

// request is one signed (or deliberately unsigned) webhook.
type request struct {
	provider string
	body     []byte
	header   http.Header
}

type reply struct {
	status int
	body   map[string]any
}

var client = &http.Client{
	Timeout:   15 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256},
}

func (s *server) post(t testing.TB, r request) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+"/webhooks/"+r.provider, bytes.NewReader(r.body))
	require.NoError(t, err)
	req.Header = r.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &body), "every answer is JSON: %s", raw)
	return reply{status: resp.StatusCode, body: body}
}

var (
	accepted  = map[string]any{"received": true, "duplicate": false}
	duplicate = map[string]any{"received": true, "duplicate": true}
)

func stripeEvent(id, typ string) []byte {
	return []byte(fmt.Sprintf(`{"id": %q, "object": "event", "type": %q, "data": {"object": {"id": "in_%s"}}}`, id, typ, id))
}

func signStripe(body []byte, secret string, at time.Time) request {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	return request{provider: "stripe", body: body, header: http.Header{"Stripe-Signature": {sp.Header}}}
}

func signSW(t testing.TB, id string, body []byte) request {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(swSecret)
	require.NoError(t, err)
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	require.NoError(t, err)
	return request{provider: "sw", body: body, header: http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {fmt.Sprint(now.Unix())},
		"Webhook-Signature": {sig},
	}}
}

func hmacSHA256(key string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return m.Sum(nil)
}

func signGitHub(id, event string, body []byte) request {
	return request{provider: "github", body: body, header: http.Header{
		"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(hmacSHA256(githubSecret, body))},
		"X-Github-Delivery":   {id},
		"X-Github-Event":      {event},
	}}
}

func signShopify(id, topic string, body []byte) request {
	return request{provider: "shop", body: body, header: http.Header{
		"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(hmacSHA256(shopSecret, body))},
		"X-Shopify-Event-Id":    {id},
		"X-Shopify-Topic":       {topic},
	}}
}

func signAcme(event string, body []byte) request {
	return request{provider: "acme", body: body, header: http.Header{
		"X-Acme-Signature": {"sha256=" + hex.EncodeToString(hmacSHA256(acmeSecret, body))},
		"X-Acme-Event":     {event},
	}}
}

type claimRow struct {
	EventType   string
	ObjectID    *string
	Status      string
	Payload     []byte
	ContentType string
}

func (s *server) claimRow(t testing.TB, provider, id string) (claimRow, bool) {
	t.Helper()
	var c claimRow
	err := s.pool.QueryRow(context.Background(), `SELECT event_type, object_id, status, payload, content_type
FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`, provider, id).
		Scan(&c.EventType, &c.ObjectID, &c.Status, &c.Payload, &c.ContentType)
	if err != nil {
		return claimRow{}, false
	}
	return c, true
}

func (s *server) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (s *server) claims(t testing.TB) int {
	return s.count(t, `SELECT count(*) FROM webhook_event_claims`)
}

// jobs counts the jobs in the database, read through River's API.
func (s *server) jobs(t testing.TB) int {
	return len(testfactory.Jobs(context.Background(), t, s.pool, testfactory.JobWhere{}))
}

func (s *server) deliveries(t testing.TB, provider, id string) map[string]string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT route, status FROM webhook_deliveries
WHERE provider = $1 AND event_id = $2`, provider, id)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var r, st string
		require.NoError(t, rows.Scan(&r, &st))
		out[r] = st
	}
	require.NoError(t, rows.Err())
	return out
}

// requireJobs asserts, with River's own helper, the delivery jobs in the
// database, in insertion order.
func (s *server) requireJobs(t *testing.T, want ...claim.DeliveryArgs) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	expected := make([]rivertest.ExpectedJob, len(want))
	for i := range want {
		expected[i] = rivertest.ExpectedJob{Args: &claim.DeliveryArgs{}}
	}
	jobs := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, tx, expected)
	got := make([]claim.DeliveryArgs, len(jobs))
	for i, j := range jobs {
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &got[i]))
	}
	require.ElementsMatch(t, want, got)
}

func jsonField(t testing.TB, body []byte, key string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	s, _ := m[key].(string)
	require.NotEmpty(t, s, key)
	return s
}
