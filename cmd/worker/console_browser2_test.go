package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/devsecret"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// screenshotDirEnv names a directory the second browser test saves the
// README's screenshots to: the second round's, the overview and a claim
// with its attempts open; the third round's, the routes page with an open
// circuit and the bulk retry's confirmation with its examples.
const screenshotDirEnv = "HOOKGATE_CONSOLE_SCREENSHOT_DIR"

// secondRoundConsole is the console of `make run` (one operator, whose
// password make run generates) and a viewer.
const secondRoundConsole = `    secret_headers: {X-Api-Key: T_SHIP_KEY}
console:
  users:
    - name: operator
      role: operator
      password_env: HOOKGATE_CONSOLE_PASSWORD
    - name: bob
      role: viewer
      password_env: T_BOB
`

const bobPassword = "bob-password-0002"

// TestConsoleSecondRoundInBrowser drives Chromium through the second
// round's console: sign in with the password make run's banner prints,
// see the overview's chart, find claims by an event id substring, open an
// attempt's request and answer headers, retry the failed claims in bulk
// (a dry-run count, a confirmation, the audit row), and find that a
// viewer sees no request or answer of any attempt.
func TestConsoleSecondRoundInBrowser(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	var healthy atomic.Bool
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Request-Id", "req_browser_1")
		w.Header().Set("Content-Type", "application/json")
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"maintenance","retry_in":30}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(down.Close)
	path := appendConfig(t, writeConfig(t, down.URL), secondRoundConsole)

	// As make run does: a password for the operator, and the banner.
	cfg, err := config.Load(path)
	require.NoError(t, err)
	generated, logins, err := devsecret.Console(cfg, func(k string) string { return map[string]string{"T_BOB": bobPassword}[k] }, t.TempDir())
	require.NoError(t, err)
	env := workerEnv(db, path)
	env["T_BOB"], env["T_SHIP_KEY"] = bobPassword, "sk_browser_secret_key"
	for k, v := range generated {
		env[k] = v
	}
	addr, logs := startWorker(t, env)
	base := "http://" + addr
	m := regexp.MustCompile(`sign in as operator \(operator\), password (\S+)`).FindStringSubmatch(devsecret.Banner(cfg, base, logins))
	require.NotNil(t, m, "the banner says how to sign in")
	password := m[1]

	store := newStore(t, db)
	for _, id := range []string{"evt_pay_0001", "evt_pay_0002", "evt_refund_0003"} {
		claimEvent(t, store, id, `{"id":"`+id+`","object":"event"}`)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
		require.NoError(c, err)
		require.Equal(c, 3, n)
	}, 60*time.Second, 50*time.Millisecond, "the claims did not fail:\n%s", logs)
	// A day of earlier traffic for the chart: delivered, and a few failed.
	for h := 1; h < 24; h++ {
		for i := range 2 + h*7%9 {
			st, ds := claim.Completed, claim.DeliveryCompleted
			if i == 0 && h%5 == 0 {
				st, ds = claim.Failed, claim.DeliveryFailed
			}
			testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_day_%02d_%d", h, i), Status: st,
				FirstSeenAt: testfactory.Ago(time.Duration(h)*time.Hour + time.Duration(i)*time.Minute),
				Deliveries:  map[string]*testfactory.DeliveryOpts{"ship": {Status: ds, LastError: "HTTP 503 Service Unavailable"}}})
		}
	}

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
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		require.NoError(t, err, sel)
		return n
	}
	shot := func(name string) {
		t.Helper()
		dir := os.Getenv(screenshotDirEnv)
		if dir == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
	loaded := func(what string, cond string) {
		t.Helper()
		require.Eventually(t, func() bool {
			done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond+` && document.readyState === "complete"`))
			return err == nil && done
		}, 2*time.Minute, 50*time.Millisecond, "%s did not load", what)
	}

	// The listener's root leads to the console; the banner's password signs in.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#name"), "operator"),
		chromedp.SendKeys(css("#password"), password),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("#charts")),
	), "signing in with the banner's password")
	require.Contains(t, text("header .who"), "operator (operator)")
	require.Equal(t, 1, count("#chart-ship svg"), "the route's chart")
	require.Positive(t, count("#chart-ship svg rect.bar-failed"), "its failures drawn")
	require.Equal(t, 0, count("script"), "no script")
	shot("console-overview.png")

	// Substring search.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`nav a[href="/console/claims"]`)),
		chromedp.WaitVisible(css("#filters")),
		chromedp.SetValue(css("#status"), "failed"),
		chromedp.SendKeys(css("#event_id"), "*pay_000*"),
		chromedp.Click(css("#apply")),
	), "searching by substring")
	loaded("the substring search", `location.search.includes("event_id=")`)
	require.Equal(t, "2", text("#matched"))
	listed := text("#claims")
	require.Contains(t, listed, "evt_pay_0001")
	require.Contains(t, listed, "evt_pay_0002")
	require.NotContains(t, listed, "evt_refund_0003")
	require.Contains(t, text("#claims .failed-routes"), "ship:")

	// An attempt in full, for the operator.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`a.claim-link[href="/console/claims/stripe/evt_pay_0001"]`)),
		chromedp.WaitVisible(css("#attempts")),
	), "opening a claim")
	require.Equal(t, 3, count("#attempts details.attempt-request"), "one per attempt")
	open, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("details[open]").length`))
	require.NoError(t, err)
	require.Zero(t, open, "collapsed by default")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#attempts tr.attempt-full details.attempt-request summary")),
		chromedp.Click(css("#attempts tr.attempt-full details.attempt-response-headers summary")),
		chromedp.Click(css("#attempts tr.attempt-full details.attempt-response summary")),
	), "opening the first attempt")
	request := text("#attempts tr.attempt-full details.attempt-request pre")
	require.Contains(t, request, "POST "+down.URL+"/ship")
	require.Contains(t, request, "Hookgate-Attempt: 1")
	require.Contains(t, request, "X-Api-Key: [redacted]")
	require.Contains(t, request, "Webhook-Signature: [redacted]")
	require.NotContains(t, request, "sk_browser_secret_key")
	require.Contains(t, text("#attempts tr.attempt-full details.attempt-response-headers pre"), "X-Request-Id: req_browser_1")
	require.Contains(t, text("#attempts tr.attempt-full details.attempt-response pre"), `"retry_in": 30`, "pretty-printed")
	require.Contains(t, text("#deliveries .delivery-attempts"), "attempt 3 · 3 of 3 in this run")
	shot("console-claim-attempts.png")
	// Long text wraps: no table is wider than the 1280 px window.
	widest, err := chromedp.Run(ctx, chromedp.Evaluate[float64](
		`Math.max(0, ...Array.from(document.querySelectorAll("table"), t => t.getBoundingClientRect().width))`))
	require.NoError(t, err)
	require.Positive(t, widest)
	require.LessOrEqual(t, widest, 1280.0)

	// Bulk retry of the list's filters: a count, a confirmation, the audit.
	failedBefore, err := store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/claims?status=failed&event_id="+url.QueryEscape("*pay_000*")),
		chromedp.WaitVisible(css("#bulk-retry")),
		chromedp.Click(css("#bulk-retry")),
		chromedp.WaitVisible(css("#bulk-count")),
	), "asking for a bulk retry")
	require.Equal(t, "2", text("#bulk-matched"), "the dry run's count")
	n, err := store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Equal(t, failedBefore, n, "the count changed nothing")
	healthy.Store(true)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css("#flash")),
	), "confirming the bulk retry")
	require.Equal(t, "Bulk retry: 2 claims reopened of 2 matched.", text("#flash"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, _, err := store.Get(t.Context(), "stripe", "evt_pay_0002")
		require.NoError(c, err)
		require.Equal(c, claim.Completed, cl.Status)
		require.Empty(c, cl.LastError, "a completion clears the error")
	}, 60*time.Second, 100*time.Millisecond, "the retried claims were not delivered")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/audit?action=bulk_retry"),
		chromedp.WaitVisible(css("#audit")),
	), "opening the audit")
	require.Contains(t, text("#audit"), "operator\tbulk_retry\tclaims\tconsole")

	// A viewer sees the attempts, never their requests or answers.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css("#sign-out")),
		chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#name"), "bob"),
		chromedp.SendKeys(css("#password"), bobPassword),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("#charts")),
		chromedp.Navigate(base+"/console/claims/stripe/evt_refund_0003"),
		chromedp.WaitVisible(css("#attempts")),
	), "signing in as a viewer")
	require.Equal(t, 3, count("#attempts tr.attempt"))
	require.Zero(t, count("#attempts details"), "no request or answer for a viewer")
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NoError(t, err)
	// (An attempt's error quoting the answer's first line is the error's
	// business, not this page's: it is not looked for here.)
	for _, hidden := range []string{"req_browser_1", "Hookgate-Attempt", "X-Api-Key", `"retry_in": 30`} {
		require.NotContains(t, html, hidden)
	}
}
