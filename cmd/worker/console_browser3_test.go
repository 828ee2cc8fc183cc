package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// thirdRoundRoute makes the ship route reshape what it sends (body:) and
// open its circuit after three failures, for an hour: the test closes it
// by hand. Then alice, an operator, and bob, a viewer.
const thirdRoundRoute = `    body: '{order: .id, kind: "shipment"}'
    breaker: {failures: 3, cool_down: 1h, max_cool_down: 1h}
console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
    - name: bob
      role: viewer
      password_env: T_BOB
`

// TestConsoleThirdRoundInBrowser drives Chromium through the failing demo's
// path with a real worker and a downstream that answers 503 until told
// otherwise: the circuit opens and the routes page tells its story; the
// close asks first and says how many held deliveries it released; the
// bulk retry's confirmation shows examples and counts by route, and the
// list then links to what was reopened; the request a reshaping route sent
// (its body) is shown to an operator and not to a viewer; the overview's
// bars carry their numbers in a <title>.
func TestConsoleThirdRoundInBrowser(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	var healthy atomic.Bool
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(down.Close)
	env := workerEnv(db, appendConfig(t, writeConfig(t, down.URL), thirdRoundRoute))
	env["T_BOB"] = bobPassword
	addr, logs := startWorker(t, env)
	base := "http://" + addr
	defer func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	}()

	// The first event spends its three attempts, and they open the circuit;
	// the next two are held by it.
	store := newStore(t, db)
	claimEvent(t, store, "evt_fail_1", `{"id":"evt_fail_1","object":"event"}`)
	waitStatus(t, store, "evt_fail_1", claim.Failed, logs)
	bs, err := store.Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Equal(t, claim.BreakerOpen, bs["ship"].State)
	claimEvent(t, store, "evt_held_2", `{"id":"evt_held_2","object":"event"}`)
	claimEvent(t, store, "evt_held_3", `{"id":"evt_held_3","object":"event"}`)
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := jobs.JobList(t.Context(), river.NewJobListParams().Queues(claim.Queue("ship")).States(rivertype.JobStateScheduled))
		require.NoError(c, err)
		require.Len(c, res.Jobs, 2)
	}, 30*time.Second, 20*time.Millisecond, "the circuit did not hold the two deliveries")
	// A day of earlier traffic for the chart, and failed claims to retry.
	for h := 1; h < 24; h++ {
		testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_day_%02d", h), Status: claim.Completed,
			FirstSeenAt: testfactory.Ago(time.Duration(h) * time.Hour)})
	}
	for i := range 11 {
		failedOn(t, db, fmt.Sprintf("evt_batch_%02d", i))
	}

	ctx := newChromium(t)
	b := &page{t: t, ctx: ctx}
	b.signIn(base, "alice", alicePassword)
	require.Positive(t, b.count("#chart-ship svg rect.bar title"), "each bar has a title")
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#chart-ship svg rect.bar title").textContent`))
	require.NoError(t, err)
	require.Regexp(t, `^\d\d:\d\d–\d\d:\d\d UTC: \d+ accepted, \d+ delivered, \d+ failed$`, title)

	// The open circuit's story.
	b.do("opening the routes page", chromedp.Navigate(base+"/console/routes"), chromedp.WaitVisible(css("#routes")))
	story := b.text("#route-ship .breaker-story")
	require.Regexp(t, `^Opened \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ after 3 consecutive failures; last failure: HTTP 503 Service Unavailable\.$`, story)
	require.Regexp(t, `^open, probe at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`, b.text("#route-ship .route-breaker"), "the next probe")
	b.shot("console-routes-breaker.png")

	// Closing it asks first, and says what it did.
	b.do("asking to close the circuit", chromedp.Click(css("#close-breaker-ship")), chromedp.WaitVisible(css("#breaker-story")))
	require.Equal(t, story, b.text("#breaker-story"))
	bs, err = store.Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Equal(t, claim.BreakerOpen, bs["ship"].State, "asking closes nothing")
	healthy.Store(true)
	b.do("closing the circuit", chromedp.Click(css("#confirm")), chromedp.WaitVisible(css("#flash")))
	require.Equal(t, "Circuit of route ship closed; 2 held deliveries released.", b.text("#flash"))
	require.Equal(t, "closed", b.text("#route-ship .route-breaker"))
	waitStatus(t, store, "evt_held_2", claim.Completed, logs)
	waitStatus(t, store, "evt_held_3", claim.Completed, logs)

	// What the reshaping route sent, for an operator.
	b.do("opening the failed claim", chromedp.Navigate(base+"/console/claims/stripe/evt_fail_1"), chromedp.WaitVisible(css("#attempts")),
		chromedp.Click(css("#attempts tr.attempt-full details.attempt-request summary")))
	sent := b.text("#attempts tr.attempt-full details.attempt-request pre")
	require.Contains(t, sent, `"kind": "shipment"`, "the body after the route's body program")
	require.Contains(t, sent, `"order": "evt_fail_1"`)

	// Bulk retry: examples, counts by route, and a link to follow.
	b.do("asking for a bulk retry", chromedp.Navigate(base+"/console/claims?status=failed"), chromedp.WaitVisible(css("#bulk-retry")),
		chromedp.Click(css("#bulk-retry")), chromedp.WaitVisible(css("#bulk-count")))
	require.Equal(t, "12", b.text("#bulk-matched"))
	require.Equal(t, 10, b.count("#bulk-examples li.bulk-example a"))
	require.Equal(t, "ship\t12", b.text("#bulk-by-route tr.bulk-route"))
	b.shot("console-bulk-retry.png")
	b.do("confirming the bulk retry", chromedp.Click(css("#confirm")), chromedp.WaitVisible(css("#flash")))
	require.Equal(t, "Bulk retry: 12 claims reopened of 12 matched.", b.text("#flash"))
	b.do("following what was reopened", chromedp.Click(css("#bulk-follow a")), chromedp.WaitVisible(css("#changed_since")))
	require.Equal(t, "12", b.text("#matched"))
	require.Equal(t, 12, b.count("#claims tr.claim"))

	// A viewer sees the story and the attempts, never what was sent.
	b.do("signing out", chromedp.Click(css("#sign-out")), chromedp.WaitVisible(css("#sign-in")))
	b.signIn(base, "bob", bobPassword)
	b.do("opening the claim as a viewer", chromedp.Navigate(base+"/console/claims/stripe/evt_fail_1"), chromedp.WaitVisible(css("#attempts")))
	require.Positive(t, b.count("#attempts tr.attempt"))
	require.Zero(t, b.count("#attempts details"))
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NoError(t, err)
	require.NotContains(t, html, "shipment")
}

// failedOn makes stripe's event id a claim failed on the ship route.
func failedOn(t *testing.T, db *dbtest.DB, id string) {
	t.Helper()
	testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{EventID: id, Status: claim.Failed, LastError: "HTTP 503 Service Unavailable",
		Payload:    []byte(`{"id":"` + id + `","object":"event"}`),
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed, LastError: "HTTP 503 Service Unavailable"}}})
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// page is a test's browser tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, actions...), what)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(css(sel)))
	require.NoError(p.t, err, sel)
	return strings.TrimSpace(s)
}

func (p *page) count(sel string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(p.t, err, sel)
	return n
}

// shot saves the page as name in the README's screenshot directory, when
// one is given (screenshotDirEnv).
func (p *page) shot(name string) {
	p.t.Helper()
	dir := os.Getenv(screenshotDirEnv)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

func (p *page) signIn(base, name, password string) {
	p.t.Helper()
	p.do("signing in as "+name, chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#name"), name), chromedp.SendKeys(css("#password"), password),
		chromedp.Click(css("#sign-in")), chromedp.WaitVisible(css("#charts")))
}
