package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

const (
	reconcileKey   = "rk_test_worker_reconcile_key_77"
	reconcileOps   = "ops-token-reconcile-0001"
	reconcileWatch = "viewer-token-reconcile-01"
)

// stripeEvents is a fake of Stripe's GET /v1/events: one page of the
// events it holds, newest first, for the right key only (its 401 quotes
// the key it was given, as Stripe's does).
type stripeEvents struct {
	mu     sync.Mutex
	key    string
	events []string // JSON, newest first
	calls  int
}

func (f *stripeEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Invalid API Key provided: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
		return
	}
	fmt.Fprintf(w, `{"object":"list","url":"/v1/events","has_more":false,"data":[%s]}`, strings.Join(f.events, ","))
}

func (f *stripeEvents) add(id string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append([]string{fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_%s"}}}`,
		id, at.Unix(), id)}, f.events...)
}

// reconcileSetup returns a migrated database, the fake Stripe and the
// worker's environment with a config that reconciles stripe against it.
func reconcileSetup(t *testing.T) (*dbtest.DB, *stripeEvents, map[string]string) {
	t.Helper()
	return reconcileSetupTo(t, "http://127.0.0.1:9")
}

// reconcileSetupTo is reconcileSetup with the route posting to downstream.
func reconcileSetupTo(t *testing.T, downstream string) (*dbtest.DB, *stripeEvents, map[string]string) {
	t.Helper()
	db := dbtest.NewDB(t)
	fake := &stripeEvents{key: reconcileKey}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
worker:
  shutdown_timeout: 2s
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE]
    reconcile: {api_key_env: T_STRIPE_KEY, api_base: %q, every: 1h}
routes:
  - name: ship
    provider: stripe
    events: [invoice.paid]
    url: %s/ship
console:
  users:
    - {name: alice, role: operator, password_env: T_ALICE}
  tokens:
    - {name: ops-bot, role: operator, token_env: T_OPS}
    - {name: watcher, role: viewer, token_env: T_WATCH}
`, srv.URL, downstream)), 0o600))
	env := map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": path, "T_STRIPE": "whsec_stripe",
		"T_STRIPE_KEY": reconcileKey, "T_OPS": reconcileOps, "T_WATCH": reconcileWatch, "T_ALICE": alicePassword}
	return db, fake, env
}

// worker runs `worker args...` and returns its output and error.
func worker(env map[string]string, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"worker"}, args...), getenv(env), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestReconcileCommand: `worker reconcile --dry-run` counts and claims
// nothing; `worker reconcile` claims what Stripe never delivered, which
// `claims show` shows as reconciled; `--runs` lists both runs; a key
// Stripe refuses fails the command naming the provider, never the key.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	db, fake, env := reconcileSetup(t)
	fake.add("evt_cli_1", time.Now().Add(-time.Hour))
	fake.add("evt_cli_2", time.Now().Add(-30*time.Minute))

	out, _, err := worker(env, "reconcile", "--dry-run", "--since", "24h")
	require.NoError(t, err)
	require.Contains(t, out, "cli (dry run)")
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims`).Scan(&n))
	require.Zero(t, n, "a dry run claims nothing")

	out, _, err = worker(env, "reconcile", "--provider", "stripe", "--json")
	require.NoError(t, err)
	var run claim.ReconcileRun
	require.NoError(t, json.Unmarshal([]byte(out), &run))
	require.Equal(t, []int{2, 2, 0}, []int{run.Listed, run.Claimed, run.Skipped})

	out, _, err = worker(env, "claims", "show", "stripe", "evt_cli_1")
	require.NoError(t, err)
	require.Regexp(t, `source:\s+reconcile`, out)

	out, _, err = worker(env, "reconcile", "--runs")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Contains(t, lines[2], "cli (dry run)")

	_, _, err = worker(env, "reconcile", "--provider", "nope")
	require.ErrorContains(t, err, "--provider nope: no provider with a reconcile section")

	fake.mu.Lock()
	fake.key = "rk_test_another"
	fake.mu.Unlock()
	out, stderr, err := worker(env, "reconcile")
	require.Error(t, err)
	require.Contains(t, err.Error(), "reconciling stripe")
	require.Contains(t, err.Error(), "401")
	for _, s := range []string{err.Error(), out, stderr} {
		require.NotContains(t, s, reconcileKey)
	}
}

// TestReconcileAPI: an operator's POST runs a reconciliation, audited;
// a viewer may list runs but not start one.
func TestReconcileAPI(t *testing.T) {
	t.Parallel()
	db, fake, env := reconcileSetup(t)
	_, _, err := worker(env, "migrate")
	require.NoError(t, err)
	fake.add("evt_api_1", time.Now().Add(-time.Hour))
	addr, logs := startWorker(t, env)
	call := func(method, path, token string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	// The run at start (scheduled) claims the event; wait for it.
	require.Eventually(t, func() bool {
		var n int
		return db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reconcile_runs WHERE finished_at IS NOT NULL`).Scan(&n) == nil && n > 0
	}, 30*time.Second, 50*time.Millisecond)

	status, _ := call(http.MethodPost, "/api/v1/providers/stripe/reconcile", reconcileWatch)
	require.Equal(t, http.StatusForbidden, status, "a viewer cannot start one")
	status, _ = call(http.MethodPost, "/api/v1/providers/github/reconcile", reconcileOps)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = call(http.MethodPost, "/api/v1/providers/stripe/reconcile?since=9999h", reconcileOps)
	require.Equal(t, http.StatusBadRequest, status)

	fake.add("evt_api_2", time.Now())
	// The run at start records its end a moment before its lock goes with
	// its transaction; a POST in that moment is told one is running (409,
	// nothing done). Ask again until it is not.
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, body = call(http.MethodPost, "/api/v1/providers/stripe/reconcile?since=24h", reconcileOps)
		if status != http.StatusConflict || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, http.StatusOK, status, string(body))
	var run claim.ReconcileRun
	require.NoError(t, json.Unmarshal(body, &run))
	require.Equal(t, claim.TriggerAPI, run.Trigger)
	require.Equal(t, "ops-bot", run.Actor)
	require.Equal(t, 1, run.Claimed)
	require.Equal(t, 1, run.Skipped)

	status, body = call(http.MethodGet, "/api/v1/claims/stripe/evt_api_2", reconcileWatch)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"source":"reconcile"`)

	status, body = call(http.MethodGet, "/api/v1/reconcile/runs?provider=stripe", reconcileWatch)
	require.Equal(t, http.StatusOK, status)
	var runs struct {
		Runs []claim.ReconcileRun `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(body, &runs))
	require.GreaterOrEqual(t, len(runs.Runs), 2)
	require.Equal(t, run.ID, runs.Runs[0].ID)

	var action, target, detail string
	require.NoError(t, db.Pool.QueryRow(t.Context(),
		`SELECT action, target, detail::text FROM audit_log WHERE actor = 'ops-bot' ORDER BY id DESC LIMIT 1`).Scan(&action, &target, &detail))
	require.Equal(t, []string{"reconcile", "stripe"}, []string{action, target})
	require.Contains(t, detail, fmt.Sprintf(`"run": %d`, run.ID))

	// A key Stripe refuses: the run fails naming the provider; the answer,
	// the runs and the log never hold the key.
	fake.mu.Lock()
	fake.key = "rk_test_another"
	fake.mu.Unlock()
	status, body = call(http.MethodPost, "/api/v1/providers/stripe/reconcile", reconcileOps)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), "reconciling stripe")
	require.Contains(t, string(body), "401")
	_, runsBody := call(http.MethodGet, "/api/v1/reconcile/runs", reconcileWatch)
	for _, s := range []string{string(body), string(runsBody), logs.String()} {
		require.NotContains(t, s, reconcileKey)
	}
	require.NoError(t, db.Pool.QueryRow(t.Context(),
		`SELECT detail::text FROM audit_log WHERE actor = 'ops-bot' ORDER BY id DESC LIMIT 1`).Scan(&detail))
	require.NotContains(t, detail, reconcileKey)
}

// TestReconciledEventDeliveredOnce: an event Stripe never delivered is
// claimed by the worker's scheduled run and delivered once; the webhook
// copy that arrives later (claimed as ingest claims it) is a duplicate,
// and nothing more is sent.
func TestReconciledEventDeliveredOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(down.Close)
	db, fake, env := reconcileSetupTo(t, down.URL)
	_, _, err := worker(env, "migrate")
	require.NoError(t, err)
	fake.add("evt_once", time.Now().Add(-time.Hour))
	_, logs := startWorker(t, env)
	store := newStore(t, db)
	waitStatus(t, store, "evt_once", claim.Completed, logs)

	res, err := store.Claim(t.Context(), claim.Event{Provider: "stripe", ID: "evt_once", Type: "invoice.paid",
		ContentType: "application/json", Payload: []byte(`{"id":"evt_once"}`)}, []string{"ship"}, true)
	require.NoError(t, err)
	require.True(t, res.Duplicate())
	c, _, err := store.Get(t.Context(), "stripe", "evt_once")
	require.NoError(t, err)
	require.Equal(t, claim.SourceReconcile, c.Source)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, keys, 1, "delivered once")
	require.NotEmpty(t, keys[0])
}
