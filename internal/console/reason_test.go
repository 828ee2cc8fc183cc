package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestOldErrorsShownWithoutAnswers: errors written before this release
// quoted the downstream's answer after the status line; the API and the
// pages show them, to viewers and operators, cut to what they say now.
// The answer itself stays in the attempt's response, which only an
// operator's claim page shows.
func TestOldErrorsShownWithoutAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const old = "attempts exhausted (3 of 3): HTTP 422 Unprocessable Entity: card 4242424242424242 declined"
	k := failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_old", Deliveries: map[string]*testfactory.DeliveryOpts{
		"ship": {Status: claim.DeliveryFailed, LastError: old}}})
	// The claim's roll-up carries its last delivery's error.
	testfactory.SetClaim(t.Context(), t, e.db.Pool, k, &testfactory.ClaimOpts{LastError: old})
	code := 422
	addAttempt(t, e, k, "ship", 1, &code, "HTTP 422 Unprocessable Entity: card 4242424242424242 declined", "card 4242424242424242 declined")
	addAttempt(t, e, k, "ship", 2, &code, "redirected (HTTP 302 Found); redirects are not followed: to 4242424242424242", "")

	for _, c := range []cred{bob, alice} {
		for _, path := range []string{"/api/v1/claims", "/api/v1/claims/stripe/evt_old"} {
			status, body := e.call(t, c, http.MethodGet, path, nil, nil)
			require.Equal(t, http.StatusOK, status, body)
			require.Contains(t, body, `"last_error":"attempts exhausted (3 of 3): HTTP 422 Unprocessable Entity"`)
			if path == "/api/v1/claims/stripe/evt_old" {
				require.Contains(t, body, `"error":"HTTP 422 Unprocessable Entity"`)
				require.Contains(t, body, `"error":"redirected (HTTP 302 Found); redirects are not followed"`)
			}
		}
	}
	_, viewer := e.call(t, bob, http.MethodGet, "/api/v1/claims/stripe/evt_old", nil, nil)
	require.NotContains(t, viewer, "4242")
	_, operator := e.call(t, alice, http.MethodGet, "/api/v1/claims/stripe/evt_old", nil, nil)
	require.Contains(t, operator, `"response":"card 4242424242424242 declined"`, "the answer stays in the response")

	for _, who := range []struct{ name, password string }{{"bob", secrets["T_BOB"]}, {"alice", secrets["T_ALICE"]}} {
		b := browser(t, e)
		b.signIn(t, who.name, who.password)
		for _, path := range []string{"/console/claims", "/console/claims/stripe/evt_old"} {
			resp, page := b.do(t, http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Contains(t, page, "HTTP 422 Unprocessable Entity", who.name+" "+path)
			require.NotContains(t, page, "Entity: card", who.name+" "+path)
			require.NotContains(t, page, "followed: to", who.name+" "+path)
			if who.name == "bob" || path == "/console/claims" {
				require.NotContains(t, page, "4242", who.name+" "+path)
			}
		}
	}
}
