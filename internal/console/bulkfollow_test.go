package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestBulkRetryExamplesAndFollow: the bulk retry's confirmation lists ten
// of the matching claims, linked, and counts them by the route they failed
// on; once done, the list links to the claims it reopened (the filters,
// any status, changed since the confirmation), and to no other.
func TestBulkRetryExamplesAndFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaims(t, e, "evt_bulk", 11)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_bulk_both", Deliveries: map[string]*testfactory.DeliveryOpts{
		"ship": {Status: claim.DeliveryFailed, LastError: "HTTP 503 Service Unavailable"},
		"mail": {Status: claim.DeliveryFailed, LastError: "timeout after 10s"}}})
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_other"})
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])

	resp, confirm := b.do(t, http.MethodGet, "/console/claims/retry?event_id="+url.QueryEscape("evt_bulk"), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, confirm)
	require.Contains(t, confirm, `<strong id="bulk-matched">12</strong> failed claims match`)
	examples := regexp.MustCompile(`<li class="bulk-example"><a href="/console/claims/stripe/(evt_bulk[_0-9a-z]+)">stripe/`).FindAllStringSubmatch(confirm, -1)
	require.Len(t, examples, 10, "ten of the twelve")
	require.Contains(t, confirm, "The 10 newest of them:")
	require.Regexp(t, `<tr class="bulk-route"><td>ship</td><td>12</td></tr><tr class="bulk-route"><td>mail</td><td>1</td></tr>`, confirm)
	require.NotContains(t, confirm, "evt_other")

	resp, _ = b.do(t, http.MethodPost, "/console/claims/retry", hiddenFields(confirm))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, after := b.do(t, http.MethodGet, resp.Header.Get("Location"), nil)
	require.Contains(t, after, "Bulk retry: 12 claims reopened of 12 matched.")
	follow := regexp.MustCompile(`<p id="bulk-follow"><a href="([^"]+)">`).FindStringSubmatch(after)
	require.NotNil(t, follow, after)
	href := strings.ReplaceAll(follow[1], "&amp;", "&")
	require.Contains(t, href, "changed_since=")
	require.NotContains(t, href, "status=")

	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_bulk_unchanged", UpdatedAt: testfactory.Ago(3600e9)})
	_, list := b.do(t, http.MethodGet, href, nil)
	require.Contains(t, list, `<span id="matched">12</span> claims match`, "the twelve reopened, not the one left unchanged")
	require.NotContains(t, list, "evt_bulk_unchanged")
	require.Equal(t, 12, strings.Count(list, `<tr class="claim status-processing">`))

	resp, _ = b.do(t, http.MethodGet, "/console/claims?changed_since=yesterday", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	for _, q := range []string{"bulk_matched=1&bulk_reopened=1&bulk_as_of=nope", "bulk_as_of=2026-01-01T00:00:00Z"} {
		_, list = b.do(t, http.MethodGet, "/console/claims?"+q, nil)
		require.NotContains(t, list, `id="bulk-follow"`, q)
	}
}

// TestBulkButtonOnlyWhenFailed: the list offers the bulk retry only when
// its filters match a failed claim, and says when none failed.
func TestBulkButtonOnlyWhenFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 3 {
		testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_done_%d", i), Status: claim.Completed})
	}
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	for _, q := range []string{"", "?status=failed"} {
		_, list := b.do(t, http.MethodGet, "/console/claims"+q, nil)
		require.NotContains(t, list, `id="bulk-retry"`, q)
		require.Contains(t, list, `id="none-failed">None failed: nothing to retry in bulk.</span>`, q)
	}

	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_failed"})
	_, list := b.do(t, http.MethodGet, "/console/claims", nil)
	require.Contains(t, list, `<span id="matched">4</span> claims match`)
	require.Contains(t, list, `id="bulk-retry"`)
	require.NotContains(t, list, `id="none-failed"`)
	_, list = b.do(t, http.MethodGet, "/console/claims?event_id=evt_done", nil)
	require.NotContains(t, list, `id="bulk-retry"`, "these filters match no failed claim")
}
