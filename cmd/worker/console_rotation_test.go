package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// consoleClient signs in and checks sessions on the console of the worker
// at addr, never following a redirect.
type consoleClient struct {
	base   string
	client *http.Client
}

func newConsoleClient(addr string) consoleClient {
	return consoleClient{base: "http://" + addr, client: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn signs alice in with password and returns the session's cookie.
func (c consoleClient) signIn(t *testing.T, password string) *http.Cookie {
	t.Helper()
	form := url.Values{"name": {"alice"}, "password": {password}}
	resp, err := c.client.Post(c.base+"/console/sign-in", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	return resp.Cookies()[0]
}

// signedIn reports whether session still signs in (a page, not the
// redirect to the sign-in form).
func (c consoleClient) signedIn(t *testing.T, session *http.Cookie) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+"/console/claims", nil)
	require.NoError(t, err)
	req.AddCookie(session)
	resp, err := c.client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// aliceSessions counts alice's session rows.
func aliceSessions(t *testing.T, db *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions WHERE actor = 'alice'`).Scan(&n))
	return n
}

// TestPasswordRotationEndsSessions: alice's password_file goes A → B → A
// on a running worker. Her session signed in under A is deleted as soon as
// the worker reads B, though nobody uses it or signs in meanwhile, so it
// does not come back with A. Before, the session's row stayed, refused only
// while the password differed, and worked again under A.
func TestPasswordRotationEndsSessions(t *testing.T) {
	t.Parallel()
	const passA, passB = "alice-password-A-0001", "alice-password-B-0002"
	db := dbtest.NewDB(t)
	file := filepath.Join(t.TempDir(), "alice-password")
	require.NoError(t, os.WriteFile(file, []byte(passA+"\n"), 0o600))
	cfg := appendConfig(t, writeConfig(t, "http://127.0.0.1:1"), `console:
  users:
    - name: alice
      role: operator
      password_file: `+file+`
`)
	w := serveWorker(t, workerEnv(db, cfg))
	c := newConsoleClient(w.addr)

	underA := c.signIn(t, passA)
	require.True(t, c.signedIn(t, underA))
	require.Equal(t, 1, aliceSessions(t, db))

	require.NoError(t, os.WriteFile(file, []byte(passB+"\n"), 0o600))
	require.Eventually(t, func() bool { return aliceSessions(t, db) == 0 }, 15*time.Second, 50*time.Millisecond,
		"the session of A is deleted once the worker reads B, unused:\n%s", w.logs)
	require.Contains(t, w.logs.String(), "the user's password changed; their sessions ended")

	require.NoError(t, os.WriteFile(file, []byte(passA+"\n"), 0o600))
	require.Eventually(t, func() bool {
		return strings.Count(w.logs.String(), "the user's password changed; their sessions ended") == 2
	}, 15*time.Second, 50*time.Millisecond, "the worker reads A again:\n%s", w.logs)
	c.signIn(t, passA)
	require.False(t, c.signedIn(t, underA), "the session of A's first time does not come back with A")
}

// TestEnvPasswordRotationAcrossRestarts: alice's password_env goes A → B →
// A across restarts, and nobody uses her session or signs in while B is
// current. Her session signed in under A is ended when the worker starts
// with B, so it does not come back with A: refused, its row gone. Before,
// its fingerprint matched A again and it signed in. A restart with the
// same password ends nothing.
func TestEnvPasswordRotationAcrossRestarts(t *testing.T) {
	t.Parallel()
	const passA, passB = "alice-password-A-0001", "alice-password-B-0002"
	db := dbtest.NewDB(t)
	cfg := writeConsoleConfig(t, "http://127.0.0.1:1")
	start := func(password string) (*testWorker, consoleClient) {
		env := workerEnv(db, cfg)
		env["T_ALICE"] = password
		w := serveWorker(t, env)
		return w, newConsoleClient(w.addr)
	}

	w, c := start(passA)
	underA := c.signIn(t, passA)
	require.True(t, c.signedIn(t, underA))
	w.stop(t)

	w, c = start(passA)
	require.True(t, c.signedIn(t, underA), "a restart with the same password ends nothing")
	require.NotContains(t, w.logs.String(), "their sessions ended")
	w.stop(t)

	w, _ = start(passB)
	w.stop(t)
	assert.Equal(t, 0, aliceSessions(t, db), "ended at the start under B, unused")
	assert.Contains(t, w.logs.String(), "the user's password changed; their sessions ended")

	w, c = start(passA)
	require.False(t, c.signedIn(t, underA), "the session of A's first time does not come back with A")
	require.Equal(t, 0, aliceSessions(t, db))
	require.True(t, c.signedIn(t, c.signIn(t, passA)), "A signs in again")
	w.stop(t)
}
