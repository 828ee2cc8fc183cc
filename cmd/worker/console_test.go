package main

import (
	"io"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
)

const consoleSection = `console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
  tokens:
    - name: ci-bot
      role: viewer
      token_env: T_CI
`

const alicePassword = "alice-password-0001"

// writeConsoleConfig is writeConfig with the console on.
func writeConsoleConfig(t *testing.T, url string) string {
	t.Helper()
	return appendConfig(t, writeConfig(t, url), consoleSection)
}

func get(t *testing.T, url string, set func(*http.Request)) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if set != nil {
		set(req)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestConsoleOffWithoutUsersOrTokens(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	addr, _ := startWorker(t, workerEnv(db, writeConfig(t, "http://127.0.0.1:1")))
	basic := func(r *http.Request) { r.SetBasicAuth("alice", alicePassword) }
	for _, p := range []string{"/api/v1/claims", "/api/v1/", "/console/", "/console/sign-in", "/"} {
		require.Equal(t, http.StatusNotFound, get(t, "http://"+addr+p, basic), p)
	}
}

func TestConsoleServedByWorker(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := workerEnv(db, writeConsoleConfig(t, "http://127.0.0.1:1"))

	// A secret it names must be there, or the worker does not start.
	missing := maps.Clone(env)
	delete(missing, "T_CI")
	err := run(t.Context(), []string{"worker", "--listen", proctest.FreeAddr(t)}, getenv(missing), io.Discard, io.Discard)
	require.EqualError(t, err, "console.tokens[0].token_env: environment variable T_CI is not set or empty")

	addr, _ := startWorker(t, env)
	base := "http://" + addr
	require.Equal(t, http.StatusUnauthorized, get(t, base+"/api/v1/claims", nil))
	require.Equal(t, http.StatusOK, get(t, base+"/api/v1/claims", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer ci-token-abcdefghijkl")
	}))
	require.Equal(t, http.StatusSeeOther, get(t, base+"/console/", nil), "to the sign-in form")
	// The listener's root leads to the console; nothing else moves.
	req, err := http.NewRequest(http.MethodGet, base+"/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/console/", resp.Header.Get("Location"))
	require.Equal(t, http.StatusNotFound, get(t, base+"/nothing-here", nil))

	// A state change from another origin is refused before it is
	// authenticated, though its credentials are right.
	for _, path := range []string{"/api/v1/routes/ship/pause", "/console/sign-in"} {
		req, err := http.NewRequest(http.MethodPost, base+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("alice", alicePassword)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		require.JSONEq(t, `{"error":"cross-origin request refused"}`, string(body))
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log`).Scan(&n))
	require.Zero(t, n, "nothing was done")
}

// The worker's API reads through console.read_pool: a read past its
// statement_timeout is answered 503 naming it, while /readyz, on the
// worker's own pool, answers 200.
func TestConsoleReadsTimeOut(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfg := appendConfig(t, writeConsoleConfig(t, "http://127.0.0.1:1"), "  read_pool: {max_conns: 1, statement_timeout: 300ms}\n")
	addr, _ := startWorker(t, workerEnv(db, cfg))
	base := "http://" + addr
	viewer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer ci-token-abcdefghijkl") }
	// The read pool's first connection, made within its wait timeout or
	// for the next try.
	require.Eventually(t, func() bool { return get(t, base+"/api/v1/stats", viewer) == http.StatusOK }, 30*time.Second, 10*time.Millisecond)

	lock, err := db.Pool.Begin(t.Context())
	require.NoError(t, err)
	_, err = lock.Exec(t.Context(), `LOCK TABLE webhook_event_claims IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/stats", nil)
	require.NoError(t, err)
	viewer(req)
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
	require.JSONEq(t, `{"error":"the read ran past console.read_pool.statement_timeout (300ms) and was cancelled: narrow the filters or the window"}`,
		string(body))
	require.Equal(t, http.StatusOK, get(t, base+"/readyz", nil))
	require.NoError(t, lock.Rollback(t.Context()))
	require.Equal(t, http.StatusOK, get(t, base+"/api/v1/stats", viewer))
}
