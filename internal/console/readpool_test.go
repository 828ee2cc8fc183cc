package console_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/console"
)

// A read that runs past the read pool's statement timeout, or waits past
// its wait timeout for a connection, is answered 503 naming the setting it
// ran into: JSON on the API, a page on the console; never a 500, never a
// hang. Signing in, which goes through the worker's pool, is not held up.
func TestReadTimeoutIs503(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var reads *claim.ReadPool
	e := newEnvWith(t, nil, nil, nil, func(o *console.Options) {
		p, err := claim.OpenReadPool(o.DB.(*pgxpool.Pool).Config(), claim.ReadLimits{
			MaxConns: 1, StatementTimeout: 300 * time.Millisecond, WaitTimeout: time.Second})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		reads, o.Reads = p, p
	})
	// Its first connection, which may take longer than the wait timeout
	// to make on a loaded machine.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, reads.QueryRow(ctx, `SELECT 1`).Scan(new(int)))
	}, 30*time.Second, 10*time.Millisecond)
	page := browser(t, e)
	page.signIn(t, "bob", secrets["T_BOB"])

	// Every read of the claims waits for this lock, past its timeout.
	lock, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, `LOCK TABLE webhook_event_claims IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	const ranPast = "the read ran past console.read_pool.statement_timeout (300ms) and was cancelled"
	for _, path := range []string{"/api/v1/stats", "/api/v1/claims?event_id=*5*", "/api/v1/routes"} {
		status, body := e.call(t, ciBot, http.MethodGet, path, nil, nil)
		require.Equal(t, http.StatusServiceUnavailable, status, "%s: %s", path, body)
		var answer map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &answer), body)
		require.Contains(t, answer["error"], ranPast, path)
	}
	resp, body := page.do(t, http.MethodGet, "/console/", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, ranPast)
	require.NoError(t, lock.Rollback(ctx))

	// The one read connection held: a read waits its wait timeout, then 503.
	held, err := reads.Begin(ctx)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/api/v1/stats", nil)
	require.NoError(t, err)
	ciBot(req)
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var answer map[string]string
	require.NoError(t, json.NewDecoder(r.Body).Decode(&answer))
	require.NoError(t, r.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, r.StatusCode)
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	require.Contains(t, answer["error"], "every read connection (console.read_pool.max_conns) stayed busy for console.read_pool.wait_timeout (1s)")
	resp, body = page.do(t, http.MethodGet, "/console/claims", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Contains(t, body, "console.read_pool.wait_timeout (1s)")
	// The worker's pool is not the read pool: signing in goes on.
	browser(t, e).signIn(t, "alice", secrets["T_ALICE"])
	require.NoError(t, held.Rollback(ctx))

	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/stats", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, e.logs.String(), "console: read timed out")
}
