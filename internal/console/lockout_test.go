package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/lockout"
)

// from sends c's credentials as the client at addr, forwarded by the test's
// own address (a trusted proxy in these tests).
func from(addr string, c cred) cred {
	return func(r *http.Request) {
		c(r)
		r.Header.Set("X-Forwarded-For", addr)
	}
}

func basic(name, password string) cred {
	return func(r *http.Request) { r.SetBasicAuth(name, password) }
}

// guardBehindProxy is the default guard, believing X-Forwarded-For from
// the loopback, where the tests' requests come from.
func guardBehindProxy() *lockout.Guard {
	return lockout.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
}

// TestWrongTokensLockOutOnlyTheirClient: a flood of wrong bearer tokens
// from one client refuses that client, never a right token sent from
// another (before, every token shared one count, and five wrong ones
// locked every right one out).
func TestWrongTokensLockOutOnlyTheirClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, guardBehindProxy())
	statuses := map[int]int{}
	for range lockout.DefaultAddressFailures + 5 {
		status, _ := e.call(t, from("203.0.113.1", badToken), http.MethodGet, "/api/v1/routes", nil, nil)
		statuses[status]++
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: lockout.DefaultAddressFailures, http.StatusTooManyRequests: 5}, statuses)
	status, _ := e.call(t, from("203.0.113.1", ciBot), http.MethodGet, "/api/v1/routes", nil, nil)
	require.Equal(t, http.StatusTooManyRequests, status, "the guessing client is refused, unchecked")
	for _, c := range []cred{ciBot, deploy} {
		status, body := e.call(t, from("198.51.100.7", c), http.MethodGet, "/api/v1/routes", nil, nil)
		require.Equal(t, http.StatusOK, status, "a right token from another client: %s", body)
	}
	status, _ = e.call(t, from("198.51.100.7", basic("alice", secrets["T_ALICE"])), http.MethodGet, "/api/v1/routes", nil, nil)
	require.Equal(t, http.StatusOK, status)
}

// TestWrongPasswordsLockOutOnlyTheirClient: five wrong passwords for a
// name from one client refuse that name from that client; the right
// password from another client signs in, by Basic and by the form.
func TestWrongPasswordsLockOutOnlyTheirClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, guardBehindProxy())
	for range 5 {
		status, _ := e.call(t, from("203.0.113.1", badPass), http.MethodGet, "/api/v1/claims", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status)
	}
	status, _ := e.call(t, from("203.0.113.1", alice), http.MethodGet, "/api/v1/claims", nil, nil)
	require.Equal(t, http.StatusTooManyRequests, status, "the name is refused from the guessing client")
	status, _ = e.call(t, from("198.51.100.7", alice), http.MethodGet, "/api/v1/claims", nil, nil)
	require.Equal(t, http.StatusOK, status, "but not from another")

	form := url.Values{"name": {"alice"}, "password": {secrets["T_ALICE"]}}
	for _, tt := range []struct {
		addr string
		want int
	}{{"203.0.113.1", http.StatusTooManyRequests}, {"198.51.100.7", http.StatusSeeOther}} {
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/sign-in", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", tt.addr)
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tt.want, resp.StatusCode, tt.addr)
	}
}

// TestUnknownAndKnownNamesAnswerAlike: a wrong password for a configured
// name and for a made-up one get the same answers, and the same limit,
// whatever other made-up names were tried before (before, every unknown
// name shared one count, so after five of them an unknown name answered
// 429 and a real one 401).
func TestUnknownAndKnownNamesAnswerAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t, guardBehindProxy())
	for _, name := range []string{"ghost-1", "ghost-2", "ghost-3", "ghost-4", "ghost-5"} {
		status, _ := e.call(t, from("203.0.113.9", basic(name, "wrong-password-1")), http.MethodGet, "/api/v1/claims", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status)
	}
	answers := map[string][]string{}
	for _, c := range []struct{ addr, name string }{{"203.0.113.1", "alice"}, {"203.0.113.2", "mallory"}} {
		for range 6 {
			status, body := e.call(t, from(c.addr, basic(c.name, "wrong-password-1")), http.MethodGet, "/api/v1/claims", nil, nil)
			answers[c.name] = append(answers[c.name], http.StatusText(status)+" "+body)
		}
	}
	require.Equal(t, answers["alice"], answers["mallory"], "a known name and an unknown one are told apart by nothing")
	require.Contains(t, answers["alice"][4], "Unauthorized")
	require.Contains(t, answers["alice"][5], "Too Many Requests")
	status, _ := e.call(t, from("203.0.113.9", basic("ghost-6", "wrong-password-1")), http.MethodGet, "/api/v1/claims", nil, nil)
	status2, _ := e.call(t, from("203.0.113.9", badPass), http.MethodGet, "/api/v1/claims", nil, nil)
	require.Equal(t, status, status2, "after other unknown names, an unknown name and a known one still answer alike")
	require.Equal(t, http.StatusUnauthorized, status)

	// The sign-in form alike.
	forms := map[string][]string{}
	for _, c := range []struct{ addr, name string }{{"203.0.113.3", "alice"}, {"203.0.113.4", "mallory"}} {
		for range 6 {
			form := url.Values{"name": {c.name}, "password": {"wrong-password-1"}}
			req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/sign-in", strings.NewReader(form.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-For", c.addr)
			resp, err := http.DefaultTransport.RoundTrip(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			forms[c.name] = append(forms[c.name], fmt.Sprintf("%s retry-after:%t %s", resp.Status, resp.Header.Get("Retry-After") != "", body))
		}
	}
	require.Equal(t, forms["alice"], forms["mallory"], "the form tells a known name from an unknown one by nothing")
	require.Contains(t, forms["alice"][5], "429")
}
