package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
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
	db := dbtest.NewDB(t)
	env := map[string]string{
		"DATABASE_URL":         db.URL,
		"HOOKGATE_CONFIG":      writeConfig(t, "http://127.0.0.1:1"),
		"T_STRIPE":             "whsec_stripe",
		"T_SHIP_SIGNING":       signingSecret,
		"HOOKGATE_UI_PASSWORD": uiTestPassword,
	}
	addr := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &proctest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"worker", "--listen", addr}, getenv(env), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	proctest.WaitHealthy(t, "http://"+addr+"/healthz", done)
	return &opsBundle{base: "http://" + addr, db: db, logs: logs}
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
	var n int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE id = $1`, id).Scan(&n))
	return n == 1
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

// TestRiverUIRefusesCrossSiteRequests: a cross-site form post to the River
// UI's delete endpoint, with the credentials a browser would have cached,
// is refused 403 and the job is still there; a same-origin request and a
// script's (no Origin, no Sec-Fetch-Site) still delete.
func TestRiverUIRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	b := startOps(t)
	const deletePath = "/riverui/api/jobs/delete"
	body := func(id int64) string { return fmt.Sprintf(`{"ids":["%d"]}`, id) }

	victim := b.job(t, "evt_victim")
	for name, h := range map[string]map[string]string{
		"Origin":         {"Content-Type": "text/plain", "Origin": "http://evil.example"},
		"Sec-Fetch-Site": {"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"},
	} {
		resp := b.call(t, http.MethodPost, deletePath, body(victim), uiUser, uiTestPassword, h)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		require.True(t, b.jobExists(t, victim), "%s: the job is still there", name)
	}

	sameOrigin := b.job(t, "evt_same_origin")
	resp := b.call(t, http.MethodPost, deletePath, body(sameOrigin), uiUser, uiTestPassword,
		map[string]string{"Content-Type": "application/json", "Origin": b.base, "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, b.jobExists(t, sameOrigin), "the UI's own page may delete")

	resp = b.call(t, http.MethodPost, deletePath, body(victim), uiUser, uiTestPassword,
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, b.jobExists(t, victim), "a script's call, with neither header, still works")
}

// TestRiverUILimitsFailedSignIns: five failed basic-auth attempts refuse
// the name's next tries (429 with Retry-After), the right password
// included. Made-up names share one count, so a flood of them neither
// grows memory nor locks out the UI's user.
func TestRiverUILimitsFailedSignIns(t *testing.T) {
	t.Parallel()
	b := startOps(t)
	statuses := map[int]int{}
	for i := range 20 {
		statuses[b.call(t, http.MethodGet, "/riverui/", "", fmt.Sprintf("guess-%d", i), "wrong", nil).StatusCode]++
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: 15}, statuses,
		"made-up names are limited together")
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/riverui/", "", uiUser, uiTestPassword, nil).StatusCode,
		"the flood of made-up names does not lock out the UI's user")

	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, b.call(t, http.MethodGet, "/riverui/", "", uiUser, "wrong", nil).StatusCode, "try %d", i+1)
	}
	resp := b.call(t, http.MethodGet, "/riverui/", "", uiUser, uiTestPassword, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "refused without its password being checked")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, http.StatusUnauthorized, b.call(t, http.MethodGet, "/riverui/", "", "", "", nil).StatusCode,
		"a request without credentials is asked for them")
	require.Contains(t, b.logs.String(), "too many failed sign-ins")
	require.NotContains(t, b.logs.String(), "guess-", "no made-up name is logged")
}
