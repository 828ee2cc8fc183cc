package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/lockout"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const cfgDoc = `
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE]
  - name: github
    scheme: github
    secrets_env: [T_GITHUB]
routes:
  - name: ship
    provider: stripe
    events: ["*"]
    url: http://127.0.0.1:1/ship
  - name: mail
    provider: github
    events: ["*"]
    url: http://127.0.0.1:1/mail
console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
    - name: bob
      role: viewer
      password_env: T_BOB
  tokens:
    - name: ci-bot
      role: viewer
      token_env: T_CI
    - name: deploy-bot
      role: operator
      token_env: T_DEPLOY
`

var secrets = map[string]string{
	"T_ALICE": "alice-password-0001", "T_BOB": "bob-password-0002",
	"T_CI": "ci-token-abcdefghijkl", "T_DEPLOY": "deploy-token-mnopqrstuv",
}

// env is a console over a database of its own, served as the worker's
// listener serves it (behind net/http's cross-origin protection).
type env struct {
	db    *dbtest.DB
	store *claim.Store
	srv   *httptest.Server
	logs  *proctest.Buffer
}

func newEnv(t *testing.T, limiter *lockout.Guard) *env {
	t.Helper()
	return newEnvWith(t, limiter, nil, nil)
}

// newEnvWith is newEnv with the config changed by mutate (when not nil)
// and the secret files given.
func newEnvWith(t *testing.T, limiter *lockout.Guard, mutate func(*config.Config), files map[string]*secretfile.File, options ...func(*console.Options)) *env {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgDoc))
	require.NoError(t, err)
	if mutate != nil {
		mutate(cfg)
	}
	s, err := cfg.ResolveConsoleSecrets(func(k string) string { return secrets[k] })
	require.NoError(t, err)
	db := dbtest.NewDB(t)
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, jobs, cfg.MaxAttempts)
	if limiter == nil {
		limiter = &lockout.Guard{Addresses: lockout.Limiter{Failures: 1000}, Names: lockout.Limiter{Failures: 1000}}
	}
	logs := &proctest.Buffer{}
	o := console.Options{Config: cfg, Secrets: s, SecretFiles: files, Store: store, Queues: jobs, DB: db.Pool,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Guard: limiter}
	for _, set := range options {
		set(&o)
	}
	c := console.New(o)
	srv := httptest.NewServer(http.NewCrossOriginProtection().Handler(c.Handler()))
	t.Cleanup(srv.Close)
	return &env{db: db, store: store, srv: srv, logs: logs}
}

// cred sets one way of signing in on a request.
type cred func(*http.Request)

var (
	none     cred = func(*http.Request) {}
	alice    cred = func(r *http.Request) { r.SetBasicAuth("alice", secrets["T_ALICE"]) }
	bob      cred = func(r *http.Request) { r.SetBasicAuth("bob", secrets["T_BOB"]) }
	ciBot    cred = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secrets["T_CI"]) }
	deploy   cred = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secrets["T_DEPLOY"]) }
	badPass  cred = func(r *http.Request) { r.SetBasicAuth("alice", "alice-password-0002") }
	badToken cred = func(r *http.Request) { r.Header.Set("Authorization", "Bearer ci-token-abcdefghijkm") }
)

// call sends one API request and decodes its JSON answer into out (when
// not nil); it returns the status and the raw body.
func (e *env) call(t *testing.T, c cred, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(t, err)
	c(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode < 300 && resp.Header.Get("Content-Type") == "application/json" {
		require.NotContains(t, resp.Header.Get("Content-Type"), "html")
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode, string(raw)
}

func failedClaim(t *testing.T, e *env, opts testfactory.ClaimOpts) claim.EventKey {
	t.Helper()
	opts.Status = claim.Failed
	if opts.Deliveries == nil {
		opts.Deliveries = map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed, LastError: "downstream answered 500"}}
	}
	return testfactory.Claim(t.Context(), t, e.db.Pool, &opts)
}

// addAttempt writes a row of k's attempt history for route.
func addAttempt(t *testing.T, e *env, k claim.EventKey, route string, n int, status *int, errText, response string) {
	t.Helper()
	testfactory.Attempt(t.Context(), t, e.db.Pool, claim.Key{Provider: k.Provider, EventID: k.EventID, Route: route},
		&testfactory.AttemptOpts{Attempt: n, StatusCode: status, Error: errText, Response: response})
}

func TestRoleMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	k := failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1", Payload: []byte(`{"card":"4242"}`)})
	code := 500
	addAttempt(t, e, k, "ship", 1, &code, "downstream answered 500", "card 4242 declined")
	claimPath := "/api/v1/claims/" + k.Provider + "/" + k.EventID
	reads := []string{"/api/v1/claims", claimPath, "/api/v1/routes", "/api/v1/stats", "/api/v1/audit"}
	acts := []struct{ path string }{
		{claimPath + "/retry"}, {"/api/v1/retry"}, {"/api/v1/routes/ship/pause"}, {"/api/v1/routes/ship/resume"},
	}
	for _, c := range []struct {
		name string
		cred cred
	}{{"none", none}, {"wrong password", badPass}, {"wrong token", badToken}} {
		for _, p := range reads {
			status, body := e.call(t, c.cred, http.MethodGet, p, nil, nil)
			require.Equal(t, http.StatusUnauthorized, status, "%s %s", c.name, p)
			require.Contains(t, body, `"error":"unauthorized`)
			require.NotContains(t, body, "alice-password", "a secret is never echoed")
		}
		for _, a := range acts {
			status, _ := e.call(t, c.cred, http.MethodPost, a.path, map[string]any{"dry_run": true}, nil)
			require.Equal(t, http.StatusUnauthorized, status, "%s %s", c.name, a.path)
		}
	}
	for _, c := range []struct {
		name string
		cred cred
	}{{"viewer user", bob}, {"viewer token", ciBot}} {
		for _, p := range reads {
			status, body := e.call(t, c.cred, http.MethodGet, p, nil, nil)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", c.name, p, body)
		}
		for _, a := range acts {
			status, body := e.call(t, c.cred, http.MethodPost, a.path, map[string]any{"dry_run": true}, nil)
			require.Equal(t, http.StatusForbidden, status, "%s %s", c.name, a.path)
			require.Contains(t, body, "acting needs the operator role")
		}
		var d map[string]any
		e.call(t, c.cred, http.MethodGet, claimPath, nil, &d)
		require.NotContains(t, d, "payload", "a viewer never sees a payload")
		require.NotContains(t, d, "payload_json")
		var attempts struct {
			Deliveries []struct {
				Attempts []map[string]any `json:"attempts"`
			} `json:"deliveries"`
		}
		_, body := e.call(t, c.cred, http.MethodGet, claimPath, nil, &attempts)
		require.Len(t, attempts.Deliveries, 1)
		require.Len(t, attempts.Deliveries[0].Attempts, 1, body)
		require.EqualValues(t, 500, attempts.Deliveries[0].Attempts[0]["status_code"])
		require.NotContains(t, attempts.Deliveries[0].Attempts[0], "response", "a viewer never sees a response")
		require.NotContains(t, body, "declined")
	}
	var d struct {
		Status      claim.Status    `json:"status"`
		Payload     []byte          `json:"payload"`
		PayloadJSON json.RawMessage `json:"payload_json"`
		Deliveries  []struct {
			Route    string                `json:"route"`
			Status   string                `json:"status"`
			Attempts []claim.AttemptRecord `json:"attempts"`
		} `json:"deliveries"`
	}
	status, body := e.call(t, alice, http.MethodGet, claimPath, nil, &d)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, d.Deliveries[0].Attempts, 1)
	a := d.Deliveries[0].Attempts[0]
	require.Equal(t, 1, a.Attempt)
	require.EqualValues(t, 17, a.DurationMS)
	require.Equal(t, "downstream answered 500", *a.Error)
	require.Equal(t, "card 4242 declined", *a.Response, "an operator sees the response")
	require.Equal(t, claim.Failed, d.Status)
	require.Equal(t, `{"card":"4242"}`, string(d.Payload), "base64 in JSON")
	require.JSONEq(t, `{"card":"4242"}`, string(d.PayloadJSON))
	require.Len(t, d.Deliveries, 1)

	// Operators act: a user by Basic, a token by Bearer.
	for _, a := range []struct {
		cred cred
		path string
		body any
	}{
		{deploy, claimPath + "/retry", map[string]any{"force": false}},
		{alice, "/api/v1/retry", map[string]any{"dry_run": true}},
		{deploy, "/api/v1/routes/ship/pause", nil},
		{alice, "/api/v1/routes/ship/resume", nil},
	} {
		status, body := e.call(t, a.cred, http.MethodPost, a.path, a.body, nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", a.path, body)
	}
	require.NotContains(t, e.logs.String(), "alice-password", "a secret is never logged")
	require.NotContains(t, e.logs.String(), "token-")
}

func TestSignInLockout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, lockout.NewGuard(nil))
	for range 5 {
		status, _ := e.call(t, badPass, http.MethodGet, "/api/v1/claims", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status)
	}
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/claims", nil)
	require.NoError(t, err)
	alice(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the right password from the same client waits too, once locked")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	status, _ := e.call(t, bob, http.MethodGet, "/api/v1/claims", nil, nil)
	require.Equal(t, http.StatusOK, status, "another name is not locked out")
}

func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/routes/ship/pause", nil)
	require.NoError(t, err)
	deploy(req)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var paused struct {
		Routes []struct {
			Route  string `json:"route"`
			Paused bool   `json:"paused"`
		} `json:"routes"`
	}
	e.call(t, deploy, http.MethodGet, "/api/v1/routes", nil, &paused)
	require.False(t, paused.Routes[0].Paused, "the refused pause did nothing")
}

type listAnswer struct {
	Claims []struct {
		Provider   string       `json:"provider"`
		EventID    string       `json:"event_id"`
		Status     claim.Status `json:"status"`
		Deliveries []struct {
			Route string `json:"route"`
		} `json:"deliveries"`
	} `json:"claims"`
	NextCursor string `json:"next_cursor"`
}

func TestListPagesWhileClaimsArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var want []string
	for i := range 7 {
		// Oldest first, so newest-first is evt_6 … evt_0.
		k := testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{
			EventID: fmt.Sprintf("evt_%d", i), FirstSeenAt: testfactory.Ago(time.Duration(10-i) * time.Minute)})
		want = append([]string{k.EventID}, want...)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5, "pages never end")
		var a listAnswer
		q := url.Values{"limit": {"3"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/claims?"+q.Encode(), nil, &a)
		require.Equal(t, http.StatusOK, status, body)
		for _, c := range a.Claims {
			got = append(got, c.EventID)
		}
		// New claims arrive between pages: newer than every page handed out.
		testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_new_%d", page)})
		if a.NextCursor == "" {
			require.Len(t, a.Claims, 1, "7 = 3 + 3 + 1")
			break
		}
		require.Len(t, a.Claims, 3)
		cursor = a.NextCursor
	}
	require.Equal(t, want, got, "no repeats, no gaps, newest first")
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_a1", EventType: "invoice.paid", FirstSeenAt: testfactory.Ago(3 * time.Hour)})
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: "evt_a2", EventType: "invoice.created", Status: claim.Completed,
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryCompleted}}})
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{Provider: "github", EventID: "gh_1", EventType: "push",
		Deliveries: map[string]*testfactory.DeliveryOpts{"mail": nil}})
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"gh_1", "evt_a2", "evt_a1"}},
		{"status=failed", []string{"evt_a1"}},
		{"provider=github", []string{"gh_1"}},
		{"route=ship", []string{"evt_a2", "evt_a1"}},
		{"type=invoice.*", []string{"evt_a2", "evt_a1"}},
		{"type=invoice.paid", []string{"evt_a1"}},
		{"type=inv?ice.created", []string{"evt_a2"}},
		{"event_id=evt_", []string{"evt_a2", "evt_a1"}},
		{"event_id=evt_a1", []string{"evt_a1"}},
		{"event_id=evt%25", nil},
		{"since=" + since, []string{"gh_1", "evt_a2"}},
		{"before=" + since, []string{"evt_a1"}},
		{"business_key=" + url.QueryEscape(`["none"]`), nil},
		{"status=completed&provider=stripe&type=invoice.*", []string{"evt_a2"}},
	} {
		var a listAnswer
		status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims?"+tt.query, nil, &a)
		require.Equal(t, http.StatusOK, status, "%s: %s", tt.query, body)
		var got []string
		for _, c := range a.Claims {
			got = append(got, c.EventID)
		}
		require.Equal(t, tt.want, got, tt.query)
	}
	for _, tt := range []struct{ query, want string }{
		{"status=lost", "status: must be processing, completed, failed or ignored"},
		{"provider=Stripe!", "provider: must be a name"},
		{"route=" + strings.Repeat("r", 64), "route: must be a name"},
		{"type=a%20b", "type: must be printable ASCII"},
		{"type=inv[oi]ce", "type: an event type, or a glob"},
		{"event_id=" + strings.Repeat("e", 256), "event_id: must be a prefix, or a *substring*, of at most 255"},
		{"event_id=" + url.QueryEscape("**"), "event_id: a prefix or a *substring* needs at least one character besides *"},
		{"since=0h", "since: want a time ago such as 1h"},
		{"event_id=a%00", "event_id: must be UTF-8 text without NUL bytes"},
		{"business_key=" + strings.Repeat("k", 4097), "business_key: at most 4096"},
		{"since=yesterday", "since: want a time ago such as 1h, 24h or 7d, or an RFC 3339 time"},
		{"before=2026-13-01T00:00:00Z", "before: want a time ago such as 1h, 24h or 7d, or an RFC 3339 time"},
		{"since=2026-12-02T00:00:00Z&before=2026-12-01T00:00:00Z", "since: must be before before"},
		{"limit=0", "limit: must be a whole number from 1 to 500"},
		{"limit=501", "limit: must be a whole number from 1 to 500"},
		{"limit=ten", "limit: must be a whole number"},
		{"cursor=garbage", "cursor: not one this API handed out"},
		{"statuss=failed", `unknown parameter \"statuss\"`},
		{"status=failed&status=completed", "status: given more than once"},
	} {
		status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims?"+tt.query, nil, nil)
		require.Equal(t, http.StatusBadRequest, status, tt.query)
		require.Contains(t, body, `{"error":"`+tt.want, tt.query)
	}
}

func TestRetryRefusalsAndBadBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: "evt_done", Status: claim.Completed,
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryCompleted}}})
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: "evt_busy",
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": nil}})
	for _, tt := range []struct {
		path   string
		body   any
		status int
		want   string
	}{
		{"/api/v1/claims/stripe/evt_done/retry", map[string]any{"force": false}, http.StatusConflict, "stripe/evt_done is completed: every delivery succeeded; pass --force"},
		{"/api/v1/claims/stripe/evt_busy/retry", nil, http.StatusConflict, "stripe/evt_busy is still processing"},
		{"/api/v1/claims/stripe/evt_none/retry", nil, http.StatusNotFound, "no claim stripe/evt_none"},
		{"/api/v1/claims/stripe/evt_done/retry", map[string]any{"forse": true}, http.StatusBadRequest, "body: want a JSON object"},
		{"/api/v1/retry", map[string]any{}, http.StatusBadRequest, "dry_run: required"},
		{"/api/v1/retry", map[string]any{"dry_run": false, "status": "completed"}, http.StatusBadRequest, `status \"completed\": only failed claims can be retried in bulk`},
		{"/api/v1/retry", map[string]any{"dry_run": false, "since": "now"}, http.StatusBadRequest, "since: want a time ago such as 1h, 24h or 7d, or an RFC 3339 time"},
		{"/api/v1/routes/nope/pause", nil, http.StatusNotFound, `no route \"nope\" in the configuration (routes: ship, mail)`},
		{"/api/v1/nothing", nil, http.StatusNotFound, "no such endpoint"},
	} {
		status, body := e.call(t, deploy, http.MethodPost, tt.path, tt.body, nil)
		require.Equal(t, tt.status, status, "%s: %s", tt.path, body)
		require.Contains(t, body, `{"error":"`+tt.want, tt.path)
	}
	// With force, a completed claim is retried: the CLI's semantics.
	var res struct {
		Deliveries int `json:"deliveries"`
	}
	status, body := e.call(t, deploy, http.MethodPost, "/api/v1/claims/stripe/evt_done/retry", map[string]any{"force": true}, &res)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, 1, res.Deliveries)
}

func TestBulkRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	const n = 1200
	for i := range n {
		failedClaim(t, e, testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_%04d", i)})
	}
	failedClaim(t, e, testfactory.ClaimOpts{Provider: "github", EventID: "gh_1",
		Deliveries: map[string]*testfactory.DeliveryOpts{"mail": {Status: claim.DeliveryFailed}}})
	countFailed := func() int {
		n, err := e.store.CountClaims(ctx, claim.Search{Status: claim.Failed})
		require.NoError(t, err)
		return n
	}

	var res struct{ Matched, Reopened, Deliveries int }
	status, body := e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": true, "provider": "stripe"}, &res)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, n, res.Matched)
	require.Zero(t, res.Reopened)
	require.Equal(t, n+1, countFailed(), "a dry run changes nothing")
	// A dry run queues nothing.
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(e.db.Pool), &claim.DeliveryArgs{}, nil)

	status, body = e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": false, "provider": "stripe"}, &res)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, n, res.Matched)
	require.Equal(t, n, res.Reopened, "every one of them, across pages")
	require.Equal(t, n, res.Deliveries)
	require.Equal(t, 1, countFailed(), "only the other provider's claim is left failed")
	// One job per reopened delivery.
	rivertest.RequireManyInserted(ctx, t, riverpgxv5.New(e.db.Pool), testfactory.DeliveryJobs(n, nil))
}

type auditAnswer struct {
	Audit []struct {
		Actor  string          `json:"actor"`
		Action string          `json:"action"`
		Target string          `json:"target"`
		Detail json.RawMessage `json:"detail"`
	} `json:"audit"`
	NextCursor string `json:"next_cursor"`
}

func TestAuditEveryAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1"})
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_2"})
	for _, a := range []struct {
		cred cred
		path string
		body any
	}{
		{deploy, "/api/v1/claims/stripe/evt_1/retry", nil},
		{alice, "/api/v1/retry", map[string]any{"dry_run": false}},
		{alice, "/api/v1/routes/ship/pause", nil},
		{deploy, "/api/v1/routes/ship/resume", nil},
	} {
		status, body := e.call(t, a.cred, http.MethodPost, a.path, a.body, nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", a.path, body)
	}
	status, _ := e.call(t, badPass, http.MethodGet, "/api/v1/claims", nil, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	b.signOut(t)

	var a auditAnswer
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/audit?limit=4", nil, &a)
	require.Equal(t, http.StatusOK, status, body)
	require.NotEmpty(t, a.NextCursor)
	var next auditAnswer
	status, body = e.call(t, ciBot, http.MethodGet, "/api/v1/audit?cursor="+a.NextCursor, nil, &next)
	require.Equal(t, http.StatusOK, status, body)
	require.Empty(t, next.NextCursor, "the last page")
	all := append(a.Audit, next.Audit...)
	var got []string
	for _, row := range all {
		got = append(got, row.Actor+" "+row.Action+" "+row.Target)
	}
	require.Equal(t, []string{
		"alice sign_out ",
		"alice sign_in ",
		"alice failed_sign_in ",
		"deploy-bot resume ship",
		"alice pause ship",
		"alice bulk_retry claims",
		"deploy-bot retry stripe/evt_1",
	}, got, "newest first, across pages")
	require.JSONEq(t, `{"filters":{"status":"failed"},"force":false,"matched":1,"reopened":1,"deliveries":1}`, string(all[5].Detail))
	require.Contains(t, e.logs.String(), `"msg":"audit","actor":"deploy-bot","action":"retry","target":"stripe/evt_1"`, "and a log line")
}

func TestNoFilterEchoesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// A client that sends a password where a filter goes does not get it back.
	status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims?status="+secrets["T_ALICE"], nil, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.NotContains(t, body, secrets["T_ALICE"])
}

// client is a cookie-keeping client of the console that does not follow
// redirects, so that tests see them.
type client struct {
	e *env
	c *http.Client
}

func browser(t *testing.T, e *env) *client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &client{e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(t *testing.T, method, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.e.srv.URL+path, rd)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(raw)
}

func (c *client) signIn(t *testing.T, name, password string) *http.Response {
	t.Helper()
	resp, body := c.do(t, http.MethodPost, "/console/sign-in", url.Values{"name": {name}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/console/", resp.Header.Get("Location"))
	return resp
}

func (c *client) signOut(t *testing.T) {
	t.Helper()
	resp, body := c.do(t, http.MethodPost, "/console/sign-out", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	done := func(provider, route string, ago time.Duration) {
		testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{Provider: provider, Status: claim.Completed,
			FirstSeenAt: testfactory.Ago(ago), Deliveries: map[string]*testfactory.DeliveryOpts{route: {Status: claim.DeliveryCompleted}}})
	}
	done("stripe", "ship", time.Minute)
	done("stripe", "ship", time.Hour)
	done("stripe", "ship", 48*time.Hour) // outside the window
	done("github", "mail", time.Minute)
	failedClaim(t, e, testfactory.ClaimOpts{})
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{FirstSeenAt: testfactory.Ago(3 * time.Hour),
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": nil}})

	var st struct {
		Window    string `json:"window"`
		Providers []struct {
			Provider                string         `json:"provider"`
			Claims                  map[string]int `json:"claims"`
			FailureRate             float64        `json:"failure_rate"`
			OldestProcessingSeconds float64        `json:"oldest_processing_seconds"`
		} `json:"providers"`
		Routes []struct {
			Route                   string         `json:"route"`
			Deliveries              map[string]int `json:"deliveries"`
			FailureRate             float64        `json:"failure_rate"`
			OldestProcessingSeconds float64        `json:"oldest_processing_seconds"`
		} `json:"routes"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/stats?window=24h", nil, &st)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "24h0m0s", st.Window)
	require.Len(t, st.Providers, 2)
	stripe, github := st.Providers[0], st.Providers[1]
	require.Equal(t, "stripe", stripe.Provider, "failing first")
	require.Equal(t, map[string]int{"completed": 2, "failed": 1, "processing": 1}, stripe.Claims)
	require.InDelta(t, 0.3333, stripe.FailureRate, 1e-9)
	require.GreaterOrEqual(t, stripe.OldestProcessingSeconds, 3*3600.0)
	require.Equal(t, "github", github.Provider)
	require.Equal(t, map[string]int{"completed": 1}, github.Claims)
	require.Zero(t, github.FailureRate)
	require.Zero(t, github.OldestProcessingSeconds)
	require.Len(t, st.Routes, 2)
	require.Equal(t, "ship", st.Routes[0].Route)
	require.Equal(t, map[string]int{"completed": 2, "failed": 1, "processing": 1}, st.Routes[0].Deliveries)
	require.GreaterOrEqual(t, st.Routes[0].OldestProcessingSeconds, 3*3600.0)
	require.Equal(t, map[string]int{"completed": 1}, st.Routes[1].Deliveries)

	status, body = e.call(t, ciBot, http.MethodGet, "/api/v1/stats?window=72h", nil, &st)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, 3, st.Providers[0].Claims["completed"], "a wider window")

	for _, q := range []string{"window=forever", "window=30s", "window=745h", "span=1h"} {
		status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/stats?"+q, nil, nil)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Contains(t, body, `"error":"`, q)
	}
}

func TestEventIDWithSlashInPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt/with/slash"})
	var d struct {
		EventID string `json:"event_id"`
	}
	status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims/stripe/"+url.PathEscape("evt/with/slash"), nil, &d)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "evt/with/slash", d.EventID)
	status, body = e.call(t, deploy, http.MethodPost, "/api/v1/claims/stripe/"+url.PathEscape("evt/with/slash")+"/retry", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
}

// TestSecretFilesRotate: a password_file or token_file is read again when
// it changes, so a rotated password or token signs in without a restart
// and the old one is refused afterwards.
func TestSecretFilesRotate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, value string) {
		require.NoError(t, os.WriteFile(dir+"/"+name, []byte(value+"\n"), 0o600))
	}
	write("bob", "bob-password-0002")
	write("ci", "ci-token-abcdefghijkl")
	files := map[string]*secretfile.File{}
	for name, file := range map[string]string{"bob": "bob", "ci-bot": "ci"} {
		f, err := secretfile.Open(dir+"/"+file, name, nil)
		require.NoError(t, err)
		files[name] = f
	}
	e := newEnvWith(t, nil, func(c *config.Config) {
		c.Console.Users[1].PasswordEnv, c.Console.Users[1].PasswordFile = "", dir+"/bob"
		c.Console.Tokens[0].TokenEnv, c.Console.Tokens[0].TokenFile = "", dir+"/ci"
	}, files)
	newBob := func(r *http.Request) { r.SetBasicAuth("bob", "bob-password-rotated") }
	newCI := func(r *http.Request) { r.Header.Set("Authorization", "Bearer ci-token-rotated-000") }

	for _, c := range []cred{bob, ciBot} {
		status, _ := e.call(t, c, http.MethodGet, "/api/v1/routes", nil, nil)
		require.Equal(t, http.StatusOK, status, "the files' secrets at start")
	}
	write("bob", "bob-password-rotated")
	write("ci", "ci-token-rotated-000")
	for _, c := range []cred{newBob, newCI} {
		require.Eventually(t, func() bool {
			status, _ := e.call(t, c, http.MethodGet, "/api/v1/routes", nil, nil)
			return status == http.StatusOK
		}, 30*time.Second, 50*time.Millisecond, "the rotated secret never signs in")
	}
	for _, c := range []cred{bob, ciBot} {
		status, _ := e.call(t, c, http.MethodGet, "/api/v1/routes", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status, "the old secret is refused after the rotation")
	}
}
