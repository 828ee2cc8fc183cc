package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestReconcilePageInBrowser drives Chromium through the reconciliation
// page: the run at start that claimed what Stripe never delivered, a run
// Stripe refused (its error naming the provider, never the key), the
// filter by provider, and the reconciled claim's page saying where it came
// from.
func TestReconcilePageInBrowser(t *testing.T) {
	t.Parallel()
	db, fake, env := reconcileSetup(t)
	_, _, err := worker(env, "migrate")
	require.NoError(t, err)
	fake.add("evt_browser_1", time.Now().Add(-time.Hour))
	addr, logs := startWorker(t, env)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		var n int
		return db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE source = 'reconcile'`).Scan(&n) == nil && n == 1
	}, 30*time.Second, 50*time.Millisecond, "the run at start did not claim the event:\n%s", logs)
	fake.mu.Lock()
	fake.key = "rk_test_another"
	fake.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/providers/stripe/reconcile", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+reconcileOps)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

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
		chromedp.Click(css(`nav a[href="/console/reconcile"]`)),
		chromedp.WaitVisible(css("#runs")),
	), "signing in and opening the reconciliation page")

	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#runs tr.run").length`))
	require.NoError(t, err)
	require.Equal(t, 2, rows)
	// Newest first: the refused run, then the run at start.
	require.Contains(t, text("#runs tr.run:nth-of-type(2) .run-error"), "reconciling stripe")
	require.Contains(t, text("#runs tr.run:nth-of-type(2) .run-error"), "401")
	require.Contains(t, text("#runs tr.run:nth-of-type(2) .run-trigger"), "api (ops-bot)")
	require.Equal(t, "1", text("#runs tr.run:nth-of-type(3) .run-claimed"))
	require.Equal(t, "schedule", text("#runs tr.run:nth-of-type(3) .run-trigger"))
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	require.NotContains(t, page, reconcileKey)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(css("#provider"), "github"),
		chromedp.Click(css("#apply")),
	), "filtering")
	require.Eventually(t, func() bool {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`location.search.includes("provider=github") && document.readyState === "complete" ? document.querySelectorAll("#runs tr.run").length : -1`))
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond, "the filter did not apply")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/claims/stripe/evt_browser_1"),
		chromedp.WaitVisible(css("#claim-source")),
	), "opening the reconciled claim")
	require.Equal(t, "reconcile", text("#claim-source"))
}
