package console_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// replica is a second console over e's database, as another worker
// replica serves it.
func replica(t *testing.T, e *env) *env {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgDoc))
	require.NoError(t, err)
	s, err := cfg.ResolveConsoleSecrets(func(k string) string { return secrets[k] })
	require.NoError(t, err)
	jobs, err := river.NewClient(riverpgxv5.New(e.db.Pool), &river.Config{})
	require.NoError(t, err)
	c := console.New(console.Options{Config: cfg, Secrets: s, Store: claim.NewStore(e.db.Pool, jobs, cfg.MaxAttempts),
		Queues: jobs, DB: e.db.Pool, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(http.NewCrossOriginProtection().Handler(c.Handler()))
	t.Cleanup(srv.Close)
	return &env{db: e.db, store: e.store, srv: srv, logs: e.logs}
}

func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := browser(t, e)
	resp, _ := b.do(t, http.MethodGet, "/console/claims", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "no session: to the sign-in form")
	require.Equal(t, "/console/sign-in", resp.Header.Get("Location"))

	resp, body := b.do(t, http.MethodPost, "/console/sign-in", url.Values{"name": {"alice"}, "password": {"not-her-password"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "Wrong name or password.")
	require.NotContains(t, body, "not-her-password", "never echoed")
	require.Empty(t, resp.Cookies())

	resp = b.signIn(t, "alice", secrets["T_ALICE"])
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.False(t, c.Secure, "plain HTTP")
	require.Equal(t, "/console/", c.Path)
	resp, body = b.do(t, http.MethodGet, "/console/claims", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "alice (operator)")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")

	// Another replica accepts the session: it lives in Postgres.
	other := replica(t, e)
	req, err := http.NewRequest(http.MethodGet, other.srv.URL+"/console/claims", nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err = http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	b.signOut(t)
	for _, srv := range []string{e.srv.URL, other.srv.URL} {
		req, err := http.NewRequest(http.MethodGet, srv+"/console/claims", nil)
		require.NoError(t, err)
		req.AddCookie(c)
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out everywhere")
	}
	var n int
	require.NoError(t, e.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM console_sessions`).Scan(&n))
	require.Zero(t, n)

	// Over TLS (here: a proxy that says so) the cookie is Secure.
	req, err = http.NewRequest(http.MethodPost, e.srv.URL+"/console/sign-in",
		strings.NewReader(url.Values{"name": {"bob"}, "password": {secrets["T_BOB"]}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err = http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, resp.Cookies()[0].Secure)
}

func TestConsoleViewerReadsButNeverActs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1", Payload: []byte(`{"card":"4242-secret-pan"}`)})
	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	resp, body := b.do(t, http.MethodGet, "/console/claims/stripe/evt_1", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "evt_1")
	require.NotContains(t, body, "4242-secret-pan", "no payload for a viewer")
	require.NotContains(t, body, `id="retry"`)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/console/claims/stripe/evt_1/retry"},
		{http.MethodPost, "/console/claims/stripe/evt_1/retry"},
		{http.MethodPost, "/console/routes/ship/pause"},
		{http.MethodGet, "/console/routes/ship/pause"},
		{http.MethodGet, "/console/claims/retry?status=failed"},
		{http.MethodPost, "/console/claims/retry"},
	} {
		var form url.Values
		if r.method == http.MethodPost {
			form = url.Values{}
		}
		resp, body := b.do(t, r.method, r.path, form)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, r.path)
		require.Contains(t, body, "bob is a viewer; acting needs the operator role.")
	}
	cl, _, err := e.store.Get(t.Context(), "stripe", "evt_1")
	require.NoError(t, err)
	require.Equal(t, claim.Failed, cl.Status, "nothing retried")
}

func TestConsoleActs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failedClaim(t, e, testfactory.ClaimOpts{EventID: "evt_1", Payload: []byte(`{"id":"evt_1","n":[1,2]}`)})
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])

	resp, body := b.do(t, http.MethodGet, "/console/claims?status=failed", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `href="/console/claims/stripe/evt_1"`)
	resp, body = b.do(t, http.MethodGet, "/console/claims?status=lost", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "status: must be processing, completed, failed or ignored")

	resp, body = b.do(t, http.MethodGet, "/console/claims/stripe/evt_1", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "{\n  &#34;id&#34;: &#34;evt_1&#34;,\n  &#34;n&#34;: [\n    1,\n    2\n  ]\n}", "pretty-printed")
	resp, body = b.do(t, http.MethodGet, "/console/claims/stripe/evt_1/retry", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Confirm retry")
	cl, _, err := e.store.Get(t.Context(), "stripe", "evt_1")
	require.NoError(t, err)
	require.Equal(t, claim.Failed, cl.Status, "the confirmation step changes nothing")

	resp, _ = b.do(t, http.MethodPost, "/console/claims/stripe/evt_1/retry", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/console/claims/stripe/evt_1?retried=1", resp.Header.Get("Location"))
	cl, _, err = e.store.Get(t.Context(), "stripe", "evt_1")
	require.NoError(t, err)
	require.Equal(t, claim.Processing, cl.Status)
	resp, body = b.do(t, http.MethodPost, "/console/claims/stripe/evt_1/retry", url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "stripe/evt_1 is still processing")

	resp, _ = b.do(t, http.MethodPost, "/console/routes/ship/pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, body, `id="resume-ship"`)
	require.Regexp(t, `paused since \d{4}-`, body)
	resp, _ = b.do(t, http.MethodPost, "/console/routes/ship/resume", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, body, `id="pause-ship"`)

	_, body = b.do(t, http.MethodGet, "/console/audit", nil)
	for _, row := range []string{
		`<td>alice</td><td>resume</td><td class="audit-target"><a href="/console/routes#route-ship">ship</a></td><td class="audit-origin">console</td>`,
		`<td>alice</td><td>pause</td><td class="audit-target"><a href="/console/routes#route-ship">ship</a></td><td class="audit-origin">console</td>`,
		`<td>alice</td><td>retry</td><td class="audit-target"><a href="/console/claims/stripe/evt_1">stripe/evt_1</a></td><td class="audit-origin">console</td>`,
		`<td>alice</td><td>sign_in</td><td class="audit-target"></td><td class="audit-origin">console</td><td class="audit-source">127.0.0.1</td>`} {
		require.Contains(t, body, row)
	}
}

// TestPagesEscapeProviderValues puts <script> in an event id, an event type
// and a body, and reads every page that shows them: each is inert text.
func TestPagesEscapeProviderValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const evil = `<script>alert(1)</script>`
	k := failedClaim(t, e, testfactory.ClaimOpts{EventID: evil, EventType: "<script>alert(2)</script>",
		Payload: []byte(`{"note":"<script>alert(3)</script>"}`)})
	addAttempt(t, e, k, "ship", 1, nil, "<script>alert(4)</script>", "<script>alert(5)</script>")
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	claimPath := "/console/claims/stripe/" + url.PathEscape(evil)
	resp, _ := b.do(t, http.MethodPost, claimPath+"/retry", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the claim's page and actions address it")

	for _, p := range []struct {
		path  string
		shows []string
	}{
		{"/console/", nil},
		{"/console/claims", []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(2)&lt;/script&gt;"}},
		{"/console/claims?type=" + url.QueryEscape("<script>*"), []string{`value="&lt;script&gt;*"`}},
		{claimPath, []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(2)&lt;/script&gt;", "&lt;script&gt;alert(3)&lt;/script&gt;",
			`<tr class="attempt">`, `<td class="attempt-error">&lt;script&gt;alert(4)&lt;/script&gt;</td>`}},
		{claimPath + "/retry", []string{"&lt;script&gt;alert(1)&lt;/script&gt;"}},
		{"/console/routes", nil},
		{"/console/audit", []string{"stripe/&lt;script&gt;alert(1)&lt;/script&gt;"}},
	} {
		resp, body := b.do(t, http.MethodGet, p.path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, p.path)
		require.NotContains(t, strings.ToLower(body), "<script", p.path)
		for _, s := range p.shows {
			require.Contains(t, body, s, p.path)
		}
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'", "no script could run anyway")
	}
}

func TestConsoleStaticAndUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := browser(t, e)
	resp, body := b.do(t, http.MethodGet, "/console/static/style.css", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/css")
	require.NotContains(t, body, "http", "nothing loaded from outside")
	b.signIn(t, "alice", secrets["T_ALICE"])
	resp, _ = b.do(t, http.MethodGet, "/console/nothing", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = b.do(t, http.MethodGet, "/console/claims/stripe/evt_missing", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestConsoleShowsTheChain: a claim's page names what each delivery of a
// chain runs after, and shows the waiting one as waiting.
func TestConsoleShowsTheChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, err := testfactory.ClaimEvent(t.Context(), e.store, claim.Event{Provider: "stripe", ID: "evt_chain", Type: "invoice.paid",
		Payload: []byte(`{}`), After: map[string][]string{"mail": {"ship"}}}, []string{"ship", "mail"}, true)
	require.NoError(t, err)
	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	resp, body := b.do(t, http.MethodGet, "/console/claims/stripe/evt_chain", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `<td class="delivery-status">waiting <span class="delivery-after">\(after ship\)</span></td>`, body)
}
