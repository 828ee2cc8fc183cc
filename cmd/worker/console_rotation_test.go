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

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

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
	base := "http://" + w.addr
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func(password string) *http.Cookie {
		form := url.Values{"name": {"alice"}, "password": {password}}
		resp, err := noRedirect.Post(base+"/console/sign-in", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Len(t, resp.Cookies(), 1)
		return resp.Cookies()[0]
	}
	signedIn := func(c *http.Cookie) bool {
		req, err := http.NewRequest(http.MethodGet, base+"/console/claims", nil)
		require.NoError(t, err)
		req.AddCookie(c)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	sessions := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions WHERE actor = 'alice'`).Scan(&n))
		return n
	}

	underA := signIn(passA)
	require.True(t, signedIn(underA))
	require.Equal(t, 1, sessions())

	require.NoError(t, os.WriteFile(file, []byte(passB+"\n"), 0o600))
	require.Eventually(t, func() bool { return sessions() == 0 }, 15*time.Second, 50*time.Millisecond,
		"the session of A is deleted once the worker reads B, unused:\n%s", w.logs)
	require.Contains(t, w.logs.String(), "the user's password changed; their sessions ended")

	require.NoError(t, os.WriteFile(file, []byte(passA+"\n"), 0o600))
	require.Eventually(t, func() bool {
		return strings.Count(w.logs.String(), "the user's password changed; their sessions ended") == 2
	}, 15*time.Second, 50*time.Millisecond, "the worker reads A again:\n%s", w.logs)
	signIn(passA)
	require.False(t, signedIn(underA), "the session of A's first time does not come back with A")
}
