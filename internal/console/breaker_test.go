package console_test

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// openBreaker opens route's circuit as the worker would, after failures.
func openBreaker(t *testing.T, e *env, route string) {
	t.Helper()
	testfactory.OpenBreaker(t.Context(), t, e.store, route)
}

type breakerView struct {
	State       string     `json:"state"`
	Since       *time.Time `json:"since"`
	Failures    int        `json:"failures"`
	NextProbeAt *time.Time `json:"next_probe_at"`
}

// TestBreakerInTheAPI: GET /api/v1/routes shows each route's breaker;
// POST /api/v1/routes/{name}/breaker/close is for operators, closes it
// and is audited under the operator's name, from the API.
func TestBreakerInTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	routes := func() map[string]breakerView {
		t.Helper()
		var got struct {
			Routes []struct {
				Route     string      `json:"route"`
				Breaker   breakerView `json:"breaker"`
				BreakerOn bool        `json:"breaker_on"`
			} `json:"routes"`
		}
		status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &got)
		require.Equal(t, http.StatusOK, status, body)
		out := map[string]breakerView{}
		for _, r := range got.Routes {
			require.True(t, r.BreakerOn)
			out[r.Route] = r.Breaker
		}
		return out
	}
	require.Equal(t, breakerView{State: "closed"}, routes()["ship"])

	openBreaker(t, e, "ship")
	b := routes()["ship"]
	require.Equal(t, "open", b.State)
	require.Equal(t, 1, b.Failures)
	require.NotNil(t, b.Since)
	require.NotNil(t, b.NextProbeAt)
	require.WithinDuration(t, b.Since.Add(time.Hour), *b.NextProbeAt, time.Second)
	require.Equal(t, "closed", routes()["mail"].State)

	status, _ := e.call(t, ciBot, http.MethodPost, "/api/v1/routes/ship/breaker/close", nil, nil)
	require.Equal(t, http.StatusForbidden, status, "a viewer cannot close it")
	status, _ = e.call(t, deploy, http.MethodPost, "/api/v1/routes/nope/breaker/close", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "open", routes()["ship"].State)

	var res struct {
		Route   string `json:"route"`
		Breaker string `json:"breaker"`
		WasOpen bool   `json:"was_open"`
	}
	status, body := e.call(t, deploy, http.MethodPost, "/api/v1/routes/ship/breaker/close", nil, &res)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "ship", res.Route)
	require.True(t, res.WasOpen)
	require.Equal(t, "closed", routes()["ship"].State)
	status, _ = e.call(t, deploy, http.MethodPost, "/api/v1/routes/ship/breaker/close", nil, &res)
	require.Equal(t, http.StatusOK, status)
	require.False(t, res.WasOpen)

	require.Equal(t, []string{"breaker breaker_open  -", "deploy-bot breaker_close true api", "deploy-bot breaker_close false api"},
		breakerAudit(t, e, "ship"))
}

// breakerAudit lists route's audit rows, oldest first, as "actor action
// was_open origin" ("-" for no origin), read through the operator API.
func breakerAudit(t *testing.T, e *env, route string) []string {
	t.Helper()
	var page struct {
		Entries []struct {
			Actor  string `json:"actor"`
			Action string `json:"action"`
			Origin string `json:"origin"`
			Detail struct {
				WasOpen *bool `json:"was_open"`
			} `json:"detail"`
		} `json:"audit"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/audit?target="+route, nil, &page)
	require.Equal(t, http.StatusOK, status, body)
	var got []string
	for _, r := range slices.Backward(page.Entries) {
		was := ""
		if r.Detail.WasOpen != nil {
			was = strconv.FormatBool(*r.Detail.WasOpen)
		}
		got = append(got, strings.Join([]string{r.Actor, r.Action, was, cmp.Or(r.Origin, "-")}, " "))
	}
	return got
}

// TestBreakerInTheConsole: the routes page has a breaker cell and, for an
// operator, a button that closes an open circuit; the overview names
// routes whose circuit is open first; a route with breaker: off says so.
func TestBreakerInTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, func(c *config.Config) { c.Routes[0].Breaker = config.Breaker{Off: true} }, nil)
	openBreaker(t, e, "mail")
	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])

	_, body := b.do(t, http.MethodGet, "/console/routes", nil)
	require.Regexp(t, `(?s)id="route-ship">.*?<td class="route-state">active</td>\s*<td class="route-breaker">off</td>`, body)
	require.Regexp(t, `(?s)id="route-mail">.*?<td class="route-state">active</td>\s*<td class="route-breaker">open, probe at \d{4}-`, body)
	require.Contains(t, body, `id="close-breaker-mail"`)
	require.NotContains(t, body, `id="close-breaker-ship"`)

	_, body = b.do(t, http.MethodGet, "/console/", nil)
	mail, ship := strings.Index(body, `route=mail"`), strings.Index(body, `route=ship"`)
	require.True(t, mail > 0 && ship > 0, body)
	require.Less(t, mail, ship, "the open circuit is named first")

	resp, _ := b.do(t, http.MethodPost, "/console/routes/mail/breaker/close", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Regexp(t, `(?s)id="route-mail">.*?<td class="route-state">active</td>\s*<td class="route-breaker">closed</td>`, body)
	require.Equal(t, []string{"breaker breaker_open  -", "alice breaker_close true console"}, breakerAudit(t, e, "mail"),
		"closed by hand from the console: its audit row says who and from where")
	_, body = b.do(t, http.MethodGet, "/console/audit?target=mail", nil)
	require.Regexp(t, `<td>alice</td><td>breaker_close</td><td class="audit-target"><a [^>]*>mail</a></td><td class="audit-origin">console</td>`, body)

	viewer := browser(t, e)
	viewer.signIn(t, "bob", secrets["T_BOB"])
	resp, _ = viewer.do(t, http.MethodPost, "/console/routes/mail/breaker/close", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestPauseAndBreakerStayApart: pausing and resuming a route with an open
// circuit leaves the circuit open, and closing the circuit leaves a paused
// route paused.
func TestPauseAndBreakerStayApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	openBreaker(t, e, "ship")
	state := func() (paused bool, breaker string) {
		t.Helper()
		var got struct {
			Routes []struct {
				Route   string      `json:"route"`
				Paused  bool        `json:"paused"`
				Breaker breakerView `json:"breaker"`
			} `json:"routes"`
		}
		status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &got)
		require.Equal(t, http.StatusOK, status, body)
		for _, r := range got.Routes {
			if r.Route == "ship" {
				return r.Paused, r.Breaker.State
			}
		}
		t.Fatal("no route ship")
		return false, ""
	}
	for _, step := range []struct {
		path   string
		paused bool
		state  string
	}{
		{"/api/v1/routes/ship/pause", true, "open"},
		{"/api/v1/routes/ship/resume", false, "open"},
		{"/api/v1/routes/ship/pause", true, "open"},
		{"/api/v1/routes/ship/breaker/close", true, "closed"},
	} {
		status, body := e.call(t, deploy, http.MethodPost, step.path, nil, nil)
		require.Equal(t, http.StatusOK, status, body)
		paused, breaker := state()
		require.Equal(t, step.paused, paused, step.path)
		require.Equal(t, step.state, breaker, step.path)
	}
}
