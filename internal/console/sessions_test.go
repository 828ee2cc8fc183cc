package console_test

import (
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// restarted is the console over e's database as a worker restarted with
// vars as its environment and the config changed by mutate (when not nil):
// like the worker, it checks the users' passwords before it serves.
func restarted(t *testing.T, e *env, vars map[string]string, mutate func(*config.Config), files map[string]*secretfile.File) *env {
	t.Helper()
	c, r := starting(t, e, vars, mutate, files)
	c.CheckPasswords(t.Context())
	return r
}

// starting is restarted before its check of the passwords: the console
// server, and it serving.
func starting(t *testing.T, e *env, vars map[string]string, mutate func(*config.Config), files map[string]*secretfile.File) (*console.Server, *env) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgDoc))
	require.NoError(t, err)
	if mutate != nil {
		mutate(cfg)
	}
	s, err := cfg.ResolveConsoleSecrets(func(k string) string { return vars[k] })
	require.NoError(t, err)
	jobs, err := river.NewClient(riverpgxv5.New(e.db.Pool), &river.Config{})
	require.NoError(t, err)
	logs := &proctest.Buffer{}
	c := console.New(console.Options{Config: cfg, Secrets: s, SecretFiles: files, Store: claim.NewStore(e.db.Pool, jobs, cfg.MaxAttempts),
		Queues: jobs, DB: e.db.Pool, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	srv := httptest.NewServer(http.NewCrossOriginProtection().Handler(c.Handler()))
	t.Cleanup(srv.Close)
	return c, &env{db: e.db, store: e.store, srv: srv, logs: logs}
}

// signedIn reports whether cookie c still signs in on e.
func signedIn(t *testing.T, e *env, c *http.Cookie) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/console/claims", nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func sessionCookie(t *testing.T, e *env, name, password string) *http.Cookie {
	t.Helper()
	resp := browser(t, e).signIn(t, name, password)
	require.Len(t, resp.Cookies(), 1)
	return resp.Cookies()[0]
}

// TestSessionsEndOnPasswordChangeAtRestart: a worker restarted with a new
// password for alice no longer accepts her sessions (bob's, unchanged,
// still sign in); a user removed from the configuration has none left, and
// none come back when the user is added again.
func TestSessionsEndOnPasswordChangeAtRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	aliceSession := sessionCookie(t, e, "alice", secrets["T_ALICE"])
	bobSession := sessionCookie(t, e, "bob", secrets["T_BOB"])
	require.True(t, signedIn(t, e, aliceSession))

	same := restarted(t, e, secrets, nil, nil)
	require.True(t, signedIn(t, same, aliceSession), "a restart alone ends nothing")

	changed := maps.Clone(secrets)
	changed["T_ALICE"] = "alice-password-changed"
	after := restarted(t, e, changed, nil, nil)
	require.False(t, signedIn(t, after, aliceSession), "alice's password changed: her session ended")
	require.True(t, signedIn(t, after, bobSession), "bob's did not change")
	require.False(t, signedIn(t, same, aliceSession), "ended for every replica: the row is gone")

	withoutBob := restarted(t, e, changed, func(c *config.Config) { c.Console.Users = c.Console.Users[:1] }, nil)
	require.False(t, signedIn(t, withoutBob, bobSession), "bob was removed")
	require.False(t, signedIn(t, after, bobSession), "and his session does not come back with him")
}

// TestSessionsEndOnPasswordChangeAndBackAcrossRestarts: alice's password
// goes A → B → A across restarts and nobody uses her session while B is
// current. The start under B ends it, so A does not bring it back; bob's
// unchanged password keeps his.
func TestSessionsEndOnPasswordChangeAndBackAcrossRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	aliceSession := sessionCookie(t, e, "alice", secrets["T_ALICE"])
	bobSession := sessionCookie(t, e, "bob", secrets["T_BOB"])

	changed := maps.Clone(secrets)
	changed["T_ALICE"] = "alice-password-changed"
	underB := restarted(t, e, changed, nil, nil)
	require.Contains(t, underB.logs.String(), "the user's password changed; their sessions ended")
	require.Equal(t, 0, sessionRows(t, e, "alice"), "ended at the start under B, unused")

	underA := restarted(t, e, secrets, nil, nil)
	require.False(t, signedIn(t, underA, aliceSession), "the session of A's first time does not come back with A")
	require.True(t, signedIn(t, underA, bobSession), "bob's password never changed")
	require.True(t, signedIn(t, underA, sessionCookie(t, underA, "alice", secrets["T_ALICE"])))
}

// TestSessionsEndOnceWithoutRecordedPassword: a user with no recorded
// password (the first start after migration 00027) has their sessions
// ended once: the next restart with the same password keeps the new ones.
// The table keeps a salted verifier, never the password or its digest.
func TestSessionsEndOnceWithoutRecordedPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	before := sessionCookie(t, e, "alice", secrets["T_ALICE"])
	var salt, verifier []byte
	require.NoError(t, e.db.Pool.QueryRow(t.Context(), `SELECT salt, verifier FROM console_user_secrets WHERE actor = 'alice'`).
		Scan(&salt, &verifier))
	require.Len(t, salt, 16)
	digest := sha256.Sum256([]byte(secrets["T_ALICE"]))
	require.NotEqual(t, digest[:], verifier)
	require.NotContains(t, string(verifier), secrets["T_ALICE"])
	_, err := e.db.Pool.Exec(t.Context(), `DELETE FROM console_user_secrets`)
	require.NoError(t, err)

	upgraded := restarted(t, e, secrets, nil, nil)
	require.Contains(t, upgraded.logs.String(), "no password recorded for the user yet")
	require.False(t, signedIn(t, upgraded, before), "ended once")
	after := sessionCookie(t, upgraded, "alice", secrets["T_ALICE"])

	again := restarted(t, e, secrets, nil, nil)
	require.True(t, signedIn(t, again, after), "and only once")
	require.NotContains(t, again.logs.String(), "their sessions ended")
}

// TestReplicasStartingAtOnceEndSessionsOnce: replicas that start at once
// with alice's new password end her old sessions once between them, and
// one started later ends none of the sessions signed in under it.
func TestReplicasStartingAtOnceEndSessionsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	old := sessionCookie(t, e, "alice", secrets["T_ALICE"])
	changed := maps.Clone(secrets)
	changed["T_ALICE"] = "alice-password-changed"
	var replicas []*env
	var wg sync.WaitGroup
	for range 4 {
		c, r := starting(t, e, changed, nil, nil)
		replicas = append(replicas, r)
		wg.Go(func() { c.CheckPasswords(t.Context()) })
	}
	wg.Wait()
	ended := 0
	for _, r := range replicas {
		ended += strings.Count(r.logs.String(), "their sessions ended")
	}
	require.Equal(t, 1, ended, "one replica ends the sessions; the others find the password recorded")
	require.False(t, signedIn(t, replicas[0], old))

	session := sessionCookie(t, replicas[0], "alice", "alice-password-changed")
	later := restarted(t, e, changed, nil, nil)
	require.True(t, signedIn(t, later, session), "a replica started later with the same password ends nothing")
	require.True(t, signedIn(t, replicas[1], session))
}

// sessionRows counts actor's session rows.
func sessionRows(t *testing.T, e *env, actor string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM console_sessions WHERE actor = $1`, actor).Scan(&n))
	return n
}

// TestSessionsEndOnPasswordFileChange: a password_file read again with a
// new password ends the sessions signed in with the old one, without a
// restart; the new password signs in.
func TestSessionsEndOnPasswordFileChange(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/bob"
	require.NoError(t, os.WriteFile(path, []byte(secrets["T_BOB"]+"\n"), 0o600))
	f, err := secretfile.Open(path, "bob", nil)
	require.NoError(t, err)
	e := newEnvWith(t, nil, func(c *config.Config) {
		c.Console.Users[1].PasswordEnv, c.Console.Users[1].PasswordFile = "", path
	}, map[string]*secretfile.File{"bob": f})
	session := sessionCookie(t, e, "bob", secrets["T_BOB"])
	require.True(t, signedIn(t, e, session))
	require.NoError(t, os.WriteFile(path, []byte("bob-password-rotated\n"), 0o600))
	require.Eventually(t, func() bool { return !signedIn(t, e, session) }, 30*time.Second, 50*time.Millisecond,
		"the session outlived the password change")
	sessionCookie(t, e, "bob", "bob-password-rotated")
}

// TestEndAllSessions: POST /console/sessions/end-all ends every session of
// the signed-in user, on every browser, and no one else's; it is audited,
// refused from another origin, and needs a session.
func TestEndAllSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	otherBrowser := sessionCookie(t, e, "bob", secrets["T_BOB"])
	alice := sessionCookie(t, e, "alice", secrets["T_ALICE"])

	// From another origin: refused, nothing ended.
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/sessions/end-all", nil)
	require.NoError(t, err)
	req.AddCookie(otherBrowser)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.True(t, signedIn(t, e, otherBrowser))

	resp, body := b.do(t, http.MethodGet, "/console/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `formaction="/console/sessions/end-all"`, "a button on every page")
	resp, body = b.do(t, http.MethodPost, "/console/sessions/end-all", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/console/sign-in", resp.Header.Get("Location"))
	resp, _ = b.do(t, http.MethodGet, "/console/claims", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "this browser's session ended")
	require.False(t, signedIn(t, e, otherBrowser), "and the other browser's")
	require.True(t, signedIn(t, e, alice), "alice's sessions are hers")

	resp, _ = browser(t, e).do(t, http.MethodPost, "/console/sessions/end-all", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/console/sign-in", resp.Header.Get("Location"), "without a session: to the sign-in form")

	var a auditAnswer
	status, raw := e.call(t, ciBot, http.MethodGet, "/api/v1/audit", nil, &a)
	require.Equal(t, http.StatusOK, status, raw)
	require.Equal(t, "bob", a.Audit[0].Actor)
	require.Equal(t, "end_sessions", a.Audit[0].Action)
	var detail map[string]any
	require.NoError(t, json.Unmarshal(a.Audit[0].Detail, &detail))
	require.Equal(t, map[string]any{"via": "console", "sessions": float64(2)}, detail)
}
