package main

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// screenshotEnv names a file the browser test saves a screenshot of the
// claim page to (the README's docs/console-claim.png).
const screenshotEnv = "HOOKGATE_CONSOLE_SCREENSHOT"

// chromium finds Debian's Chromium, failing the test (never skipping it)
// with the command that installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console's browser test needs Chromium: apt-get update && apt-get install -y chromium")
	return ""
}

// newChromium starts a headless Chromium for the test, closed when it
// ends, and returns the context its steps run in.
func newChromium(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	// A step that waits for what never comes fails the test, not the run.
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestConsoleInBrowser drives Chromium through the console of a real worker
// whose one route first fails: sign in, filter failed claims, open the
// failed one, retry it with confirmation, watch the worker deliver it,
// sign out, and find the session gone.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	var healthy atomic.Bool
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		if !healthy.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(down.Close)
	addr, logs := startWorker(t, workerEnv(db, writeConsoleConfig(t, down.URL)))
	base := "http://" + addr

	store := newStore(t, db)
	for _, id := range []string{"evt_paid", "evt_fails"} {
		if id == "evt_paid" {
			healthy.Store(true)
		}
		claimEvent(t, store, id, `{"id":"`+id+`","object":"event","data":{"amount":4200}}`)
		want := claim.Completed
		if id == "evt_fails" {
			want = claim.Failed
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cl, _, err := store.Get(t.Context(), "stripe", id)
			require.NoError(c, err)
			require.Equal(c, want, cl.Status)
		}, 60*time.Second, 50*time.Millisecond, "%s did not settle:\n%s", id, logs)
		healthy.Store(false)
	}
	healthy.Store(true) // the downstream is back: a retry will pass

	ctx := newChromium(t)
	defer func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	}()
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err, sel)
		return strings.TrimSpace(s)
	}

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#name"), "alice"),
		chromedp.SendKeys(css("#password"), alicePassword),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("#stats")),
		chromedp.Click(css(`nav a[href="/console/claims"]`)),
		chromedp.WaitVisible(css("#filters")),
		chromedp.SetValue(css("#status"), "failed"),
		chromedp.Click(css("#apply")),
	), "signing in and filtering")
	// The form's GET has loaded once the address says so (the unfiltered
	// page lists the failed claim too).
	require.Eventually(t, func() bool {
		// Fails while the page is being replaced; true once the new one is in.
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.search.includes("status=failed") && document.readyState === "complete"`))
		return err == nil && done
	}, 2*time.Minute, 50*time.Millisecond, "the filtered page did not load")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css("tr.status-failed a.claim-link"))))
	listed := text("#claims")
	require.Contains(t, listed, "evt_fails")
	require.NotContains(t, listed, "evt_paid", "only failed claims")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("tr.status-failed a.claim-link")),
		chromedp.WaitVisible(css("#retry")),
	), "opening the claim")
	require.Equal(t, "failed", text("#claim-status"))
	require.Contains(t, text("#payload"), `"amount": 4200`, "pretty-printed for an operator")
	// The attempt timeline: a row per attempt, each a 503 with its error.
	statuses := func() []string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#attempts tr.attempt .attempt-status"), td => td.textContent.trim())`))
		require.NoError(t, err)
		return s
	}
	history, err := store.Attempts(t.Context(), "stripe", "evt_fails", false)
	require.NoError(t, err)
	failed := statuses()
	require.NotEmpty(t, failed)
	require.Len(t, failed, len(history["ship"]))
	for _, s := range failed {
		require.Equal(t, "503", s)
	}
	require.Contains(t, text("#attempts tr.attempt .attempt-error"), "HTTP 503 Service Unavailable")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#retry")),
		chromedp.WaitVisible(css("#confirm")),
		chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css("#flash")),
	), "retrying with confirmation")
	require.Equal(t, "Retry queued: 1 delivery reopened.", text("#flash"))

	// The worker delivers it; the page shows it completed once reloaded.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, err := chromedp.Run(ctx, chromedp.Text(css("#claim-status")))
		require.NoError(c, err)
		if strings.TrimSpace(status) != "completed" {
			require.NoError(c, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(css("#claim-status"))))
		}
		require.Equal(c, "completed", strings.TrimSpace(status))
	}, 60*time.Second, 200*time.Millisecond, "the retried delivery did not complete")
	require.Contains(t, text("#deliveries"), "completed")
	require.Equal(t, append(failed, "201"), statuses(), "the retry's attempt ends the timeline")

	if path := os.Getenv(screenshotEnv); path != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, png, 0o644))
	}

	// On a phone's screen the page fits its width: wide tables scroll
	// inside their own box.
	for _, page := range []string{"", "/console/claims", "/console/routes", "/console/audit"} {
		if page != "" {
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+page)))
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile),
			chromedp.Reload(), chromedp.WaitVisible(css("main"))))
		fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= document.documentElement.clientWidth`))
		require.NoError(t, err)
		require.True(t, fits, "%s is wider than a phone's screen", cmp.Or(page, "the claim page"))
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateReset()))

	// Routes: pause and resume; the audit lists every action by alice.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`nav a[href="/console/routes"]`)),
		chromedp.Click(css("#pause-ship")),
		chromedp.WaitVisible(css("#confirm")),
		chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css("#resume-ship")),
	), "pausing the route, confirmed")
	require.Contains(t, text("tr.route .route-state"), "paused since")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#resume-ship")),
		chromedp.WaitVisible(css("#pause-ship")),
	), "resuming the route")
	require.Equal(t, "active", text("tr.route .route-state"))

	// An open circuit (as the breaker leaves one) is shown on the routes
	// page and closed there by hand.
	testfactory.OpenBreaker(context.Background(), t, claim.NewStore(db.Pool, nil, nil), "ship")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(css("#close-breaker-ship")),
	), "an open circuit on the routes page")
	require.Contains(t, text("tr.route .route-breaker"), "open, probe at")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#close-breaker-ship")),
		chromedp.WaitVisible(css("#breaker-story")),
		chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css("#flash")),
	), "closing the circuit by hand, confirmed")
	require.Equal(t, "Circuit of route ship closed; 0 held deliveries released.", text("#flash"))
	require.Equal(t, "closed", text("tr.route .route-breaker"))

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`nav a[href="/console/audit"]`)),
		chromedp.WaitVisible(css("#audit")),
	), "opening the audit")
	audit := text("#audit")
	for _, row := range []string{"alice\tbreaker_close\tship", "alice\tresume\tship", "alice\tpause\tship", "alice\tretry\tstripe/evt_fails", "alice\tsign_in"} {
		require.Contains(t, audit, row)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`nav a[href="/console/"]`)),
		chromedp.WaitVisible(css("#route-stats")),
	), "opening the overview")
	require.Equal(t, "failed\tprocessing\tcompleted\tignored\n0\t0\t2\t0", text("#stats"), "both claims completed in the last 24 hours")

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	require.NoError(t, err)
	require.Len(t, cookies.Cookies, 1)
	session := cookies.Cookies[0]
	require.True(t, session.HTTPOnly)
	require.Equal(t, network.CookieSameSiteStrict, session.SameSite)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#sign-out")),
		chromedp.WaitVisible(css("#sign-in")),
		chromedp.Navigate(base+"/console/claims"),
		chromedp.WaitVisible(css("#sign-in")),
	), "signing out")
	// The old cookie, sent by anyone, no longer signs in.
	require.Equal(t, http.StatusSeeOther, get(t, base+"/console/claims", func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	}))
	require.GreaterOrEqual(t, calls.Load(), int32(5), "1 delivered, 3 failed attempts, 1 retried")
}
