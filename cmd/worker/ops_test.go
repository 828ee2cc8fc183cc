package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

const uiTestPassword = "ui-test-password"

// opsBundle is a running worker with the River UI on, over a database of
// the test's own.
type opsBundle struct {
	base string
	db   *dbtest.DB
	logs *proctest.Buffer
}

func startOps(t *testing.T) *opsBundle {
	t.Helper()
	return startOpsWith(t, "")
}

// startOpsWith is startOps with worker.trusted_proxies set to proxies
// (when not empty).
func startOpsWith(t *testing.T, proxies string) *opsBundle {
	t.Helper()
	db := dbtest.NewDB(t)
	cfg := writeConfig(t, "http://127.0.0.1:1")
	if proxies != "" {
		b, err := os.ReadFile(cfg)
		require.NoError(t, err)
		b = []byte(strings.Replace(string(b), "worker:\n", "worker:\n  trusted_proxies: ["+proxies+"]\n", 1))
		require.NoError(t, os.WriteFile(cfg, b, 0o600))
	}
	env := map[string]string{
		"DATABASE_URL":         db.URL,
		"HOOKGATE_CONFIG":      cfg,
		"T_STRIPE":             "whsec_stripe",
		"T_SHIP_SIGNING":       signingSecret,
		"HOOKGATE_UI_PASSWORD": uiTestPassword,
	}
	w := serveWorker(t, env)
	return &opsBundle{base: "http://" + w.addr, db: db, logs: w.logs}
}

// job enqueues a delivery job scheduled an hour ahead, which no worker
// takes meanwhile, and returns its id.
func (b *opsBundle) job(t *testing.T, id string) int64 {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	res, err := client.Insert(t.Context(), claim.DeliveryArgs{Provider: "stripe", EventID: id, Route: "ship"},
		&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return res.Job.ID
}

func (b *opsBundle) jobExists(t *testing.T, id int64) bool {
	t.Helper()
	return len(testfactory.Jobs(t.Context(), t, b.db.Pool, testfactory.JobWhere{ID: id})) == 1
}

// call sends one request to the ops server with basic auth (when user is
// set) and the given headers, and returns the response, body read.
func (b *opsBundle) call(t *testing.T, method, path, body, user, pass string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestRiverUIReadOnly: the River UI reads, but every request of it that
// would change state (cancel, retry and delete jobs; pause, resume and
// update queues) is refused 405 with the right credentials, and nothing
// changed: such changes would bypass the console's roles and its audit.
func TestRiverUIReadOnly(t *testing.T) {
	t.Parallel()
	b := startOps(t)
	id := b.job(t, "evt_kept")
	body := fmt.Sprintf(`{"ids":["%d"]}`, id)
	for _, tt := range []struct{ method, path, body string }{
		{http.MethodPost, "/riverui/api/jobs/cancel", body},
		{http.MethodPost, "/riverui/api/jobs/delete", body},
		{http.MethodPost, "/riverui/api/jobs/retry", body},
		{http.MethodPut, "/riverui/api/queues/ship/pause", ""},
		{http.MethodPut, "/riverui/api/queues/ship/resume", ""},
		{http.MethodPatch, "/riverui/api/queues/ship", `{"concurrency":null}`},
		{http.MethodDelete, "/riverui/api/jobs", ""},
	} {
		resp := b.call(t, tt.method, tt.path, tt.body, uiUser, uiTestPassword, map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tt.method, tt.path)
		require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	}
	require.True(t, b.jobExists(t, id), "the job is still there")
	require.Equal(t, rivertype.JobStateScheduled, testfactory.Jobs(t.Context(), t, b.db.Pool, testfactory.JobWhere{ID: id})[0].State,
		"neither cancelled nor retried")
	var paused int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM river_queue WHERE paused_at IS NOT NULL`).Scan(&paused))
	require.Zero(t, paused, "no queue paused")
	for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=scheduled", "/riverui/api/queues"} {
		require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, path, "", uiUser, uiTestPassword, nil).StatusCode, path)
	}
}

// TestRiverUILimitsFailedSignIns: failures are counted per client address
// (X-Forwarded-For from a trusted proxy, here the test's own loopback) and
// per name from it: five wrong passwords refuse the UI's user from that
// client (429 with Retry-After, the right password included), never from
// another; the UI's user name and a made-up one are limited alike; and a
// client past 20 failures is refused whatever name it tries.
func TestRiverUILimitsFailedSignIns(t *testing.T) {
	t.Parallel()
	b := startOpsWith(t, "127.0.0.0/8")
	as := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	for _, name := range []string{uiUser, "made-up"} {
		for i := range 5 {
			require.Equal(t, http.StatusUnauthorized, b.call(t, http.MethodGet, "/riverui/", "", name, "wrong", as("203.0.113.1")).StatusCode,
				"%s try %d", name, i+1)
		}
		resp := b.call(t, http.MethodGet, "/riverui/", "", name, "wrong", as("203.0.113.1"))
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, name)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	require.Equal(t, http.StatusTooManyRequests, b.call(t, http.MethodGet, "/riverui/", "", uiUser, uiTestPassword, as("203.0.113.1")).StatusCode,
		"refused from the guessing client without its password being checked")
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/riverui/", "", uiUser, uiTestPassword, as("198.51.100.7")).StatusCode,
		"another client's failures never refuse the right password")

	statuses := map[int]int{}
	for i := range 25 {
		statuses[b.call(t, http.MethodGet, "/riverui/", "", fmt.Sprintf("guess-%d", i), "wrong", as("203.0.113.2")).StatusCode]++
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: 20, http.StatusTooManyRequests: 5}, statuses, "a client is limited whatever names it tries")
	require.Equal(t, http.StatusUnauthorized, b.call(t, http.MethodGet, "/riverui/", "", "", "", nil).StatusCode,
		"a request without credentials is asked for them")
	require.Contains(t, b.logs.String(), "too many failed sign-ins")
	require.NotContains(t, b.logs.String(), "guess-", "no made-up name is logged")
}
