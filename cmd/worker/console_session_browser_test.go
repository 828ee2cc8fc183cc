package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestSessionEndsOnPasswordChangeInBrowser: Chromium signs in to a real
// worker whose operator's password is a password_file; the file is changed
// (a rotation, as a mounted Secret's update does it), and the browser's
// next page is the sign-in form: the session is gone. The new password
// signs in; "End all my sessions" ends that one too.
func TestSessionEndsOnPasswordChangeInBrowser(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	pwFile := filepath.Join(t.TempDir(), "alice-password")
	require.NoError(t, os.WriteFile(pwFile, []byte(alicePassword+"\n"), 0o600))
	cfg := appendConfig(t, writeConfig(t, "http://127.0.0.1:1"),
		"console:\n  users:\n    - name: alice\n      role: operator\n      password_file: "+pwFile+"\n")
	addr, logs := startWorker(t, workerEnv(db, cfg))
	base := "http://" + addr

	ctx := newChromium(t)
	defer func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	}()
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	signIn := func(password string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(base+"/console/"),
			chromedp.WaitVisible(css("#sign-in")),
			chromedp.SendKeys(css("#name"), "alice"),
			chromedp.SendKeys(css("#password"), password),
			chromedp.Click(css("#sign-in")),
			chromedp.WaitVisible(css("#stats")),
		), "signing in")
	}
	onSignInForm := func() bool {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/console/claims"), chromedp.WaitReady(css("main"))))
		path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
		require.NoError(t, err)
		return path == "/console/sign-in"
	}

	signIn(alicePassword)
	require.False(t, onSignInForm(), "signed in")
	const rotated = "alice-password-rotated"
	require.NoError(t, os.WriteFile(pwFile, []byte(rotated+"\n"), 0o600))
	require.Eventually(t, onSignInForm, 60*time.Second, 100*time.Millisecond, "the session outlived the password change")
	// Ended either way, and said so: by the request that found the
	// session's password changed, or before it, by the worker that saw the
	// file change and deleted the user's sessions.
	ended := logs.String()
	require.True(t, strings.Contains(ended, "session ended: the user's password changed") ||
		strings.Contains(ended, "the user's password changed; their sessions ended"), "the log says why the session ended")

	signIn(rotated)
	require.False(t, onSignInForm())
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#end-all-sessions")),
		chromedp.WaitVisible(css("#sign-in")),
	), "ending all sessions")
	require.True(t, onSignInForm(), "ended")
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM console_sessions`).Scan(&n))
	require.Zero(t, n)
	var audited int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE actor = 'alice' AND action = 'end_sessions'`).Scan(&audited))
	require.Equal(t, 1, audited)
	require.False(t, strings.Contains(logs.String(), rotated), "no password in the log")
}
