package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// addFullAttempt writes a row of k's history with what was sent and the
// answer's headers, as the worker records them.
func addFullAttempt(t *testing.T, e *env, k claim.EventKey, route string, n int) {
	t.Helper()
	code := 503
	testfactory.Attempt(t.Context(), t, e.db.Pool, claim.Key{Provider: k.Provider, EventID: k.EventID, Route: route}, &testfactory.AttemptOpts{
		Attempt: n, StatusCode: &code, Error: "HTTP 503 Service Unavailable", Response: `{"error":"busy","retry":true}`,
		Request:         `{"method":"POST","url":"https://ship.example/v1/orders","headers":{"Authorization":["[redacted]"],"X-Tenant":["acme-tenant"]},"body":"{\"order\":\"ord_shaped_9\"}"}`,
		ResponseHeaders: `{"X-Request-Id":["req_downstream_77"]}`, RunAttempt: 2, RunMax: 2})
}

// Each attempt in full is for operators: the API answers its request and
// the answer's headers to an operator only, and the claim page shows them
// collapsed, pretty-printed; a viewer gets none of them.
func TestAttemptInFullForOperatorsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	k := failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_full"})
	addFullAttempt(t, e, k, "ship", 4)

	var detail struct {
		Deliveries []struct {
			Attempts []map[string]json.RawMessage `json:"attempts"`
		} `json:"deliveries"`
	}
	status, body := e.call(t, alice, http.MethodGet, "/api/v1/claims/stripe/evt_full", nil, &detail)
	require.Equal(t, http.StatusOK, status, body)
	a := detail.Deliveries[0].Attempts[0]
	require.JSONEq(t, `{"method":"POST","url":"https://ship.example/v1/orders","headers":{"Authorization":["[redacted]"],"X-Tenant":["acme-tenant"]},"body":"{\"order\":\"ord_shaped_9\"}"}`, string(a["request"]))
	require.JSONEq(t, `{"X-Request-Id":["req_downstream_77"]}`, string(a["response_headers"]))
	require.Contains(t, a, "response")

	for _, c := range []cred{bob, ciBot} {
		status, body = e.call(t, c, http.MethodGet, "/api/v1/claims/stripe/evt_full", nil, nil)
		require.Equal(t, http.StatusOK, status, body)
		for _, hidden := range []string{`"request"`, `"response_headers"`, `"response"`, "acme-tenant", "req_downstream_77", "busy", "ord_shaped_9"} {
			require.NotContains(t, body, hidden)
		}
	}

	op := browser(t, e)
	op.signIn(t, "alice", secrets["T_ALICE"])
	_, page := op.do(t, http.MethodGet, "/console/claims/stripe/evt_full", nil)
	require.Contains(t, page, `<details class="attempt-request"><summary>Request sent</summary><pre>POST https://ship.example/v1/orders
Authorization: [redacted]
X-Tenant: acme-tenant

{
  &#34;order&#34;: &#34;ord_shaped_9&#34;
}
</pre></details>`, "the body sent, after the headers")
	require.Contains(t, page, "X-Request-Id: req_downstream_77")
	require.Contains(t, page, "{\n  &#34;error&#34;: &#34;busy&#34;,\n  &#34;retry&#34;: true\n}", "pretty-printed")
	require.NotContains(t, page, "<details open", "collapsed")
	require.Contains(t, page, "attempt 4 · 2 of 2 in this run")

	viewer := browser(t, e)
	viewer.signIn(t, "bob", secrets["T_BOB"])
	_, page = viewer.do(t, http.MethodGet, "/console/claims/stripe/evt_full", nil)
	require.Contains(t, page, "attempt 4 · 2 of 2 in this run")
	for _, hidden := range []string{"attempt-request", "attempt-response", "acme-tenant", "req_downstream_77", "busy", "ord_shaped_9"} {
		require.NotContains(t, page, hidden)
	}
}

// Finding claims: a substring of the event id, a time ago, and each
// failed route named with its error.
func TestListFindsBySubstringAndTimeAgo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, id := range []string{"evt_pay_0001_a", "evt_pay_0002", "ord_pay_0001"} {
		failedClaim(t, e, testfactory.ClaimOpts{EventID: id})
	}
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_old_pay_0001", FirstSeenAt: testfactory.Ago(3 * 24 * time.Hour)})
	ids := func(q string) []string {
		t.Helper()
		var res struct {
			Claims []struct {
				EventID string `json:"event_id"`
			} `json:"claims"`
		}
		status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims?"+q, nil, &res)
		require.Equal(t, http.StatusOK, status, body)
		var out []string
		for _, c := range res.Claims {
			out = append(out, c.EventID)
		}
		return out
	}
	require.ElementsMatch(t, []string{"evt_pay_0001_a", "ord_pay_0001", "evt_old_pay_0001"}, ids("event_id="+url.QueryEscape("*pay_0001*")))
	require.ElementsMatch(t, []string{"evt_pay_0001_a", "evt_pay_0002", "evt_old_pay_0001"}, ids("event_id=evt_"), "a prefix as before")
	require.ElementsMatch(t, []string{"evt_pay_0001_a", "ord_pay_0001"}, ids("event_id="+url.QueryEscape("*pay_0001*")+"&since=24h"))
	require.ElementsMatch(t, []string{"evt_old_pay_0001"}, ids("before=2d"))
	require.Len(t, ids("since=7d"), 4)

	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	resp, page := b.do(t, http.MethodGet, "/console/claims?event_id="+url.QueryEscape("*pay_0001*")+"&since=1h", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<span id="matched">2</span> claims match`)
	require.Contains(t, page, `<div class="failed-route"><strong>ship</strong>: downstream answered 500</div>`)
	require.Regexp(t, `<span class="ago">just now</span>`, page)
}

// The list pages forward and back, and counts its matches up to a bound.
func TestListPagesBackAndCountsToABound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 7 {
		failedClaim(t, e, testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_%d", i), FirstSeenAt: testfactory.Ago(time.Duration(10-i) * time.Minute)})
	}
	type page struct {
		Claims []struct {
			EventID string `json:"event_id"`
		} `json:"claims"`
		Next string `json:"next_cursor"`
		Prev string `json:"prev_cursor"`
	}
	get := func(cursor string) (page, []string) {
		t.Helper()
		var p page
		status, body := e.call(t, bob, http.MethodGet, "/api/v1/claims?limit=3&cursor="+url.QueryEscape(cursor), nil, &p)
		require.Equal(t, http.StatusOK, status, body)
		var ids []string
		for _, c := range p.Claims {
			ids = append(ids, c.EventID)
		}
		return p, ids
	}
	first, ids := get("")
	require.Equal(t, []string{"evt_6", "evt_5", "evt_4"}, ids)
	require.Empty(t, first.Prev)
	second, ids := get(first.Next)
	require.Equal(t, []string{"evt_3", "evt_2", "evt_1"}, ids)
	third, ids := get(second.Next)
	require.Equal(t, []string{"evt_0"}, ids)
	back, ids := get(third.Prev)
	require.Equal(t, []string{"evt_3", "evt_2", "evt_1"}, ids)
	require.NotEmpty(t, back.Prev)
	start, ids := get(back.Prev)
	require.Equal(t, []string{"evt_6", "evt_5", "evt_4"}, ids, "back to the first page")
	require.Empty(t, start.Prev)

	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	_, html := b.do(t, http.MethodGet, "/console/claims?limit=3&cursor="+url.QueryEscape(first.Next), nil)
	require.Contains(t, html, `id="first"`)
	require.Contains(t, html, `id="prev"`)
	require.Contains(t, html, `id="next"`)
	require.Contains(t, html, `<span id="matched">7</span>`)
	_, html = b.do(t, http.MethodGet, "/console/claims?limit=3", nil)
	require.NotContains(t, html, `id="prev"`, "the first page has no previous one")

	// Past the bound the count stops: "10,000+".
	many := make([]*testfactory.ClaimOpts, 10_001)
	for i := range many {
		many[i] = &testfactory.ClaimOpts{Provider: "github", EventID: fmt.Sprintf("gh_%d", i+1), EventType: "push", Status: claim.Completed}
	}
	testfactory.Claims(t.Context(), t, e.db.Pool, many)
	_, html = b.do(t, http.MethodGet, "/console/claims?provider=github", nil)
	require.Contains(t, html, `<span id="matched">10,000&#43;</span>`, "10,000+")
}

// Bulk retry from the list: its filters, a count that changes nothing, a
// confirmation (with force), then the API's semantics and audit row.
func TestConsoleBulkRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 3 {
		failedClaim(t, e, testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_bulk_%d", i)})
	}
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_other"})
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	_, list := b.do(t, http.MethodGet, "/console/claims?status=failed&event_id="+url.QueryEscape("*bulk*"), nil)
	link := regexp.MustCompile(`id="bulk-retry" href="([^"]+)"`).FindStringSubmatch(list)
	require.NotNil(t, link, "an operator is offered the bulk retry")
	href := strings.ReplaceAll(link[1], "&amp;", "&")

	resp, confirm := b.do(t, http.MethodGet, href, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, confirm)
	require.Contains(t, confirm, `<strong id="bulk-matched">3</strong> failed claims match`)
	require.Contains(t, confirm, `<input type="hidden" name="event_id" value="*bulk*">`)
	require.Contains(t, confirm, `id="force"`)
	n, err := e.store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Equal(t, 4, n, "the count changes nothing")

	resp, _ = b.do(t, http.MethodPost, "/console/claims/retry", hiddenFields(confirm))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Location"), "bulk_reopened=3")
	_, after := b.do(t, http.MethodGet, resp.Header.Get("Location"), nil)
	require.Contains(t, after, "Bulk retry: 3 claims reopened of 3 matched.")
	n, err = e.store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the claim the filters left out is still failed")

	var audit auditAnswer
	status, body := e.call(t, alice, http.MethodGet, "/api/v1/audit?action=bulk_retry", nil, &audit)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, audit.Audit, 1)
	require.Equal(t, "alice", audit.Audit[0].Actor)
	require.JSONEq(t, `{"filters":{"status":"failed","event_id":"*bulk*"},"force":false,"matched":3,"reopened":3,"deliveries":3}`, string(audit.Audit[0].Detail))
	require.Contains(t, body, `"origin":"console"`)

	_, list = b.do(t, http.MethodGet, "/console/claims?status=completed", nil)
	require.NotContains(t, list, `id="bulk-retry"`, "completed claims are not retried in bulk")
}

// The overview draws each route's activity as inline SVG, paused routes
// first, under the strict CSP.
func TestOverviewCharts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_c1"})
	testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: "evt_c2", Status: claim.Completed,
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryCompleted}}})
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	resp, _ := b.do(t, http.MethodPost, "/console/routes/mail/pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, page := b.do(t, http.MethodGet, "/console/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		resp.Header.Get("Content-Security-Policy"))
	require.Contains(t, page, `<figure class="chart" id="chart-ship">`)
	require.Contains(t, page, `<svg xmlns="http://www.w3.org/2000/svg"`)
	require.Regexp(t, `<rect class="bar bar-accepted" x="\d+" y="6" width="5" height="90"><title>\d\d:\d\d–\d\d:\d\d UTC: 2 accepted, 1 delivered, 1 failed</title></rect>`, page)
	require.Contains(t, page, `<text class="tick tick-count" x="30" y="9">2</text>`, "the count axis's top")
	require.Contains(t, page, `<text class="tick tick-count" x="30" y="54">1</text>`, "and its half")
	require.Contains(t, page, "2 accepted · 1 delivered · 1 failed")
	require.NotContains(t, page, "<script")
	require.Less(t, strings.Index(page, `<a href="/console/claims?route=mail">mail</a></td><td class="route-state">paused`),
		strings.Index(page, `<a href="/console/claims?route=ship">ship</a>`), "the paused route first")
}

// The routes page shows where each route sends and what it takes, and a
// pause is confirmed first.
func TestRoutesPageConfirmsPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	_, page := b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, page, `<td class="route-destination"><code>POST http://127.0.0.1:1/ship</code></td>`)
	require.Contains(t, page, `<td class="route-events"><code>*</code></td>`)
	require.Contains(t, page, `<a class="button" href="/console/routes/ship/pause" id="pause-ship">`)

	resp, confirm := b.do(t, http.MethodGet, "/console/routes/ship/pause", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, confirm, "Pause route ship?")
	_, page = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, page, `id="pause-ship"`, "asking paused nothing")
	resp, _ = b.do(t, http.MethodPost, "/console/routes/ship/pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, page, `id="resume-ship"`)
	resp, _ = b.do(t, http.MethodGet, "/console/routes/nope/pause", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The audit page filters by actor, action and target, links targets,
// and says where each action came from and where a sign-in came from.
func TestAuditPageFiltersAndOrigins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_a1"})
	status, body := e.call(t, alice, http.MethodPost, "/api/v1/claims/stripe/evt_a1/retry", map[string]any{}, nil)
	require.Equal(t, http.StatusOK, status, body)
	b := browser(t, e)
	resp, _ := b.do(t, http.MethodPost, "/console/sign-in", url.Values{"name": {"alice"}, "password": {"wrong-password-123"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	b.signIn(t, "alice", secrets["T_ALICE"])
	resp, _ = b.do(t, http.MethodPost, "/console/routes/ship/pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	_, page := b.do(t, http.MethodGet, "/console/audit?action=retry", nil)
	require.Contains(t, page, `<td>alice</td><td>retry</td><td class="audit-target"><a href="/console/claims/stripe/evt_a1">stripe/evt_a1</a></td><td class="audit-origin">api</td>`)
	require.NotContains(t, page, "<td>pause</td>")
	_, page = b.do(t, http.MethodGet, "/console/audit?action=failed_sign_in", nil)
	require.Contains(t, page, `<td>failed_sign_in</td><td class="audit-target"></td><td class="audit-origin">console</td><td class="audit-source">127.0.0.1</td>`)
	_, page = b.do(t, http.MethodGet, "/console/audit?actor=alice&target=ship", nil)
	require.Contains(t, page, `<a href="/console/routes#route-ship">ship</a></td><td class="audit-origin">console</td>`)
	require.NotContains(t, page, "stripe/evt_a1")
	resp, page = b.do(t, http.MethodGet, "/console/audit?actor=%00", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, page)
}

// A count that takes too long is given up: the page still comes, saying
// "many".
func TestListCountGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, nil, nil, func(o *console.Options) { o.CountTimeout = time.Nanosecond })
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1"})
	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	resp, html := b.do(t, http.MethodGet, "/console/claims", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, html, `<span id="matched">many</span> claims match the filters <span class="muted">(not counted: counting them took too long)</span>.`)
	require.Contains(t, html, "evt_1", "the page itself is served")
}
