package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/lockout"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var signingSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("worker run test signing key 32b!"))

func TestServe(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
	}))
	t.Cleanup(down.Close)
	worker := serveWorker(t, workerEnv(db, writeConfig(t, down.URL)))
	addr, logs := worker.addr, worker.logs

	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Its sessions are the worker's (claim.PrepareWorkerSession), and its
	// start line says with which cost they plan.
	conn, err := db.Pool.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, claim.PrepareWorkerSession(t.Context(), conn.Conn()))
	var cost string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_setting('random_page_cost')`).Scan(&cost))
	conn.Hijack().Close(t.Context()) // its session now differs from the pool's
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"random_page_cost":"`+cost+`"`) },
		10*time.Second, 20*time.Millisecond, "the start line gives no random_page_cost %s:\n%s", cost, logs.String())

	// Retention runs once at start (the only worker is River's leader),
	// and its counters are served; before any delivery, the series alerts
	// read exist, at 0.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"msg":"applied retention"`) },
		20*time.Second, 20*time.Millisecond, "no retention run logged:\n%s", logs.String())
	resp, err = http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range []string{
		"hookgate_retention_deleted_total 0",
		"hookgate_retention_payloads_cleared_total 0",
		`hookgate_deliveries_total{outcome="failed",route="ship"} 0`,
		`hookgate_delivery_queue_oldest_age_seconds 0`,
		`hookgate_oldest_processing_claim_age_seconds 0`,
	} {
		require.Contains(t, strings.Split(string(raw), "\n"), line)
	}

	store := newStore(t, db)
	claimEvent(t, store, "evt_1", `{}`)
	waitStatus(t, store, "evt_1", claim.Completed, logs)
	require.EqualValues(t, 1, calls.Load())

	worker.stop(t)
	require.Contains(t, logs.String(), "worker stopped")
}

func TestStartupErrors(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfg := writeConfig(t, "http://127.0.0.1:1")
	base := map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfg, "T_STRIPE": "whsec_stripe", "T_SHIP_SIGNING": signingSecret}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for bk, bv := range base {
			m[bk] = bv
		}
		m[k] = v
		return m
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"SigningSecretMissing", nil, with("T_SHIP_SIGNING", ""),
			"routes[0].signing_secret_env: environment variable T_SHIP_SIGNING is not set or empty"},
		{"SigningSecretMalformed", nil, with("T_SHIP_SIGNING", "whsec_???"),
			"routes[0].signing_secret_env: T_SHIP_SIGNING does not hold a Standard Webhooks secret"},
		{"NoDatabaseURL", nil, with("DATABASE_URL", ""), "DATABASE_URL is not set"},
		{"NoConfig", nil, with("HOOKGATE_CONFIG", filepath.Join(t.TempDir(), "missing.yaml")), "does not exist"},
		{"UnknownCommand", []string{"frobnicate"}, base, `unknown command "frobnicate"`},
		{"UnknownCommandAfterFlags", []string{"--config", cfg, "frobnicate"}, base, `unknown command "frobnicate"`},
		{"ListenIsForServing", []string{"--listen", "127.0.0.1:0", "claims", "list"}, base, "--listen applies only when serving, not to claims"},
		{"ClaimsWithoutCommand", []string{"claims"}, base, "claims needs a command"},
		{"UnknownClaimsCommand", []string{"claims", "delete"}, base, `unknown claims command "delete"`},
		{"ListBadStatus", []string{"claims", "list", "--status", "done"}, base, `--status "done": must be processing, completed, failed or ignored`},
		{"ShowNeedsKey", []string{"claims", "show", "stripe"}, base, "claims show takes PROVIDER and EVENT_ID"},
		{"RetryNeedsKeyOrStatus", []string{"claims", "retry"}, base, "claims retry takes PROVIDER and EVENT_ID, or --status failed"},
		{"RetryBulkOnlyFailed", []string{"claims", "retry", "--status", "completed"}, base, "only failed claims can be retried in bulk"},
		{"RetryNotBoth", []string{"claims", "retry", "stripe", "evt_1", "--status", "failed"}, base, "either PROVIDER EVENT_ID or --status"},
		{"ShowUnknownClaim", []string{"claims", "show", "stripe", "evt_missing"}, base, "no claim stripe/evt_missing"},
		{"RetryUnknownClaim", []string{"claims", "retry", "stripe", "evt_missing"}, base, "no claim stripe/evt_missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			err := run(t.Context(), append([]string{"worker"}, tt.args...), getenv(tt.env), io.Discard, &stderr)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "???", "secret values never appear in errors")
		})
	}
}

// TestClaimsNeedNoSecrets runs the claims commands with only DATABASE_URL
// and the config file: operators can use them where secrets are not at hand.
func TestClaimsNeedNoSecrets(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfgPath := writeConfig(t, "http://127.0.0.1:1")
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfgPath})
	claimEvent(t, newStore(t, db), "evt_1", `{}`)

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "list"}, env, &out, io.Discard))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	require.Regexp(t, `^PROVIDER\s+EVENT ID\s+EVENT TYPE\s+STATUS\s+ATTEMPTS\s+FIRST SEEN\s+LAST ERROR$`, lines[0])
	require.Regexp(t, `^stripe\s+evt_1\s+invoice.paid\s+processing\s+0\s+\S+\s+-$`, lines[1])

	// The config file may be named before the subcommand, too.
	noConfigEnv := getenv(map[string]string{"DATABASE_URL": db.URL})
	for _, args := range [][]string{
		{"worker", "--config", cfgPath, "claims", "list"},
		{"worker", "claims", "--config", cfgPath, "list"},
		{"worker", "claims", "list", "--config", cfgPath},
	} {
		var again bytes.Buffer
		require.NoError(t, run(t.Context(), args, noConfigEnv, &again, io.Discard), args)
		require.Equal(t, out.String(), again.String(), args)
	}

	out.Reset()
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "list", "--json", "--provider", "stripe", "--limit", "1"}, env, &out, io.Discard))
	var c claim.Record
	require.NoError(t, json.Unmarshal(out.Bytes(), &c))
	require.Equal(t, "evt_1", c.EventID)

	out.Reset()
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1"}, env, &out, io.Discard))
	require.Contains(t, out.String(), "claim:       stripe/evt_1")
	require.Regexp(t, `ship\s+processing\s+0 \(max_attempts 3\)`, out.String())

	err := run(t.Context(), []string{"worker", "claims", "retry", "stripe", "evt_1"}, env, io.Discard, io.Discard)
	require.ErrorContains(t, err, "stripe/evt_1 is still processing")
}

func TestBasicAuth(t *testing.T) {
	t.Parallel()
	o := &ops{logger: slog.New(slog.DiscardHandler), guard: lockout.NewGuard(nil)}
	h := o.basicAuth("admin", "s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, tt := range []struct {
		name       string
		user, pass string
		set        bool
		want       int
	}{
		{"NoCredentials", "", "", false, http.StatusUnauthorized},
		{"WrongPassword", "admin", "s3cre", true, http.StatusUnauthorized},
		{"WrongUser", "root", "s3cret", true, http.StatusUnauthorized},
		{"EmptyPassword", "admin", "", true, http.StatusUnauthorized},
		{"Right", "admin", "s3cret", true, http.StatusTeapot},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodGet, "/riverui/", nil)
			if tt.set {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tt.want, rec.Code)
			if tt.want == http.StatusUnauthorized {
				require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Basic")
			}
		})
	}
}
