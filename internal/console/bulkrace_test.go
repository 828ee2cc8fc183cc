package console_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// failedClaims makes n failed claims named prefix_0, prefix_1, ….
func failedClaims(t *testing.T, e *env, prefix string, n int) {
	t.Helper()
	for i := range n {
		failedClaim(t, e, testfactory.ClaimOpts{EventID: fmt.Sprintf("%s_%d", prefix, i)})
	}
}

// bulkAnswer is POST /api/v1/retry's answer, a 409's included.
type bulkAnswer struct {
	Error    string `json:"error"`
	Matched  int    `json:"matched"`
	Reopened int    `json:"reopened"`
	AsOf     string `json:"as_of"`
}

// TestBulkRetryRaceAPI: a bulk retry that names its dry run (matched and
// as_of) reopens only what the dry run counted. Claims that failed since
// make it a 409 that reopens nothing and gives the new count; a retry
// confirmed on that count reopens them all; and when the count is the
// same but a counted claim was retried and another failed meanwhile, the
// one that failed after the dry run is left alone.
func TestBulkRetryRaceAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaims(t, e, "evt_race", 5)
	filters := map[string]any{"event_id": "*race*"}
	post := func(dryRun bool, confirm *bulkAnswer) (int, bulkAnswer, string) {
		t.Helper()
		body := map[string]any{"dry_run": dryRun}
		for k, v := range filters {
			body[k] = v
		}
		if confirm != nil {
			body["matched"], body["as_of"] = confirm.Matched, confirm.AsOf
		}
		var res bulkAnswer
		status, raw := e.call(t, alice, http.MethodPost, "/api/v1/retry", body, nil)
		require.NoError(t, json.Unmarshal([]byte(raw), &res), raw)
		return status, res, raw
	}
	failed := func() int {
		t.Helper()
		n, err := e.store.CountClaims(t.Context(), claim.Search{Status: claim.Failed, EventIDContains: "race"})
		require.NoError(t, err)
		return n
	}

	status, dry, raw := post(true, nil)
	require.Equal(t, http.StatusOK, status, raw)
	require.Equal(t, 5, dry.Matched)
	require.NotEmpty(t, dry.AsOf, "the dry run says when it counted")

	failedClaims(t, e, "evt_race_late", 7)
	status, res, raw := post(false, &dry)
	require.Equal(t, http.StatusConflict, status, raw)
	require.Equal(t, 12, res.Matched, "the new count")
	require.Contains(t, res.Error, "the confirmation counted 5 failed claims, and 12 match the filters now")
	require.NotEmpty(t, res.AsOf)
	require.Equal(t, 12, failed(), "nothing was reopened")

	status, res, raw = post(false, &bulkAnswer{Matched: res.Matched, AsOf: res.AsOf})
	require.Equal(t, http.StatusOK, status, raw)
	require.Equal(t, 12, res.Reopened, "confirmed on the new count, every one")
	require.Zero(t, failed())

	// The same count, another set: one counted claim is retried, one more
	// fails; the retry reopens the other counted ones only.
	filters["event_id"] = "*race_b*"
	failedClaims(t, e, "evt_race_b", 3)
	status, dry, raw = post(true, nil)
	require.Equal(t, http.StatusOK, status, raw)
	require.Equal(t, 3, dry.Matched)
	status, raw = e.call(t, alice, http.MethodPost, "/api/v1/claims/stripe/evt_race_b_0/retry", map[string]any{}, nil)
	require.Equal(t, http.StatusOK, status, raw)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_race_b_late"})
	status, res, raw = post(false, &dry)
	require.Equal(t, http.StatusOK, status, raw)
	require.Equal(t, 2, res.Reopened, "only the claims the dry run counted")
	left, err := e.store.SearchClaims(t.Context(), claim.Search{Status: claim.Failed, EventIDContains: "race"})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "evt_race_b_late", left[0].EventID, "the claim that failed after the dry run is left alone")

	// A confirmation is both fields or neither.
	status, _ = e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": false, "matched": 1}, nil)
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": false, "matched": 1, "as_of": "yesterday"}, nil)
	require.Equal(t, http.StatusBadRequest, status)
}

// hiddenFields are the hidden inputs of a page's form.
func hiddenFields(page string) url.Values {
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// TestBulkRetryRaceConsole: the console's confirmation carries the dry
// run's count and time; when more claims failed before it is submitted,
// nothing is reopened and the answer is a 409 page saying so, with the new
// count and a fresh confirmation, which then reopens them all.
func TestBulkRetryRaceConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaims(t, e, "evt_race", 5)
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	resp, confirm := b.do(t, http.MethodGet, "/console/claims/retry?status=failed&event_id="+url.QueryEscape("*race*"), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, confirm)
	require.Contains(t, confirm, `<strong id="bulk-matched">5</strong> failed claims match`)
	form := hiddenFields(confirm)
	require.Equal(t, "5", form.Get("matched"))
	require.NotEmpty(t, form.Get("as_of"))

	failedClaims(t, e, "evt_race_late", 7)
	resp, again := b.do(t, http.MethodPost, "/console/claims/retry", form)
	require.Equal(t, http.StatusConflict, resp.StatusCode, again)
	require.Contains(t, again, "Nothing was reopened: the confirmation counted 5 failed claims, and the filters match 12 now.")
	require.Contains(t, again, `<strong id="bulk-matched">12</strong> failed claims match`)
	n, err := e.store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Equal(t, 12, n, "nothing was reopened")

	form = hiddenFields(again)
	require.Equal(t, "12", form.Get("matched"))
	resp, _ = b.do(t, http.MethodPost, "/console/claims/retry", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Location"), "bulk_reopened=12")

	resp, page := b.do(t, http.MethodPost, "/console/claims/retry", url.Values{"status": {"failed"}, "event_id": {"*race*"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a form without its confirmation reopens nothing")
	require.Contains(t, page, "matched: the confirmation")
}
