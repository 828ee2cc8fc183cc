package console_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// failBreaker opens route's circuit as the worker does: two failed
// answers, the last of class last.
func failBreaker(t *testing.T, e *env, route, last string) {
	t.Helper()
	set := claim.BreakerSettings{Failures: 2, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	for _, class := range []string{"timeout", last} {
		_, err := e.store.BreakerAnswer(t.Context(), route, claim.BreakerFailed, time.Now(), class, set)
		require.NoError(t, err)
	}
}

// TestBreakerStoryInTheAPI: GET /api/v1/routes tells an open circuit's
// story, to a viewer too: when it opened, after how many failures, the
// class of the last one, and the next probe.
func TestBreakerStoryInTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failBreaker(t, e, "ship", "HTTP 503 Service Unavailable")
	var got struct {
		Routes []struct {
			Route   string `json:"route"`
			Breaker struct {
				State       string     `json:"state"`
				OpenedAt    *time.Time `json:"opened_at"`
				Failures    int        `json:"failures"`
				LastFailure *string    `json:"last_failure"`
				NextProbeAt *time.Time `json:"next_probe_at"`
			} `json:"breaker"`
		} `json:"routes"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &got)
	require.Equal(t, http.StatusOK, status, body)
	for _, r := range got.Routes {
		b := r.Breaker
		if r.Route != "ship" {
			require.Nil(t, b.OpenedAt)
			require.Nil(t, b.LastFailure)
			require.Contains(t, body, `"last_failure":null`)
			continue
		}
		require.Equal(t, "open", b.State)
		require.Equal(t, 2, b.Failures)
		require.Equal(t, "HTTP 503 Service Unavailable", *b.LastFailure)
		require.NotNil(t, b.OpenedAt)
		require.WithinDuration(t, time.Now(), *b.OpenedAt, time.Minute)
		require.WithinDuration(t, b.OpenedAt.Add(time.Hour), *b.NextProbeAt, time.Second)
	}
}

// TestBreakerCloseConfirmed: the routes page tells the open circuit's
// story; its close button leads to a confirmation (operators only) that
// tells it again, and the close leaves a note of what it did on the
// routes page: how many held deliveries it released.
func TestBreakerCloseConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failBreaker(t, e, "mail", "connection refused")
	_, err := testfactory.ClaimEvent(t.Context(), e.store, claim.Event{Provider: "stripe", ID: "evt_held", Type: "invoice.paid",
		Payload: []byte(`{}`)}, []string{"mail"}, false)
	require.NoError(t, err)
	held := testfactory.SetJobs(t.Context(), t, e.db.Pool, testfactory.JobWhere{}, &testfactory.JobOpts{State: rivertype.JobStateScheduled, ScheduledAt: testfactory.In(time.Hour)})
	require.Len(t, held, 1)

	viewer := browser(t, e)
	viewer.signIn(t, "bob", secrets["T_BOB"])
	_, body := viewer.do(t, http.MethodGet, "/console/routes", nil)
	require.Regexp(t, `(?s)id="route-mail">.*?<div class="breaker-story">Opened <span class="breaker-opened-at">\d{4}-[^<]+</span> after <span class="breaker-failures">2</span> consecutive failures; last failure: <span class="breaker-last-failure">connection refused</span>.</div>`, body)
	require.NotContains(t, body, `id="close-breaker-mail"`)
	resp, _ := viewer.do(t, http.MethodGet, "/console/routes/mail/breaker/close", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	b := browser(t, e)
	b.signIn(t, "alice", secrets["T_ALICE"])
	_, body = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Contains(t, body, `href="/console/routes/mail/breaker/close" id="close-breaker-mail"`)
	resp, body = b.do(t, http.MethodGet, "/console/routes/mail/breaker/close", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<form method="post" action="/console/routes/mail/breaker/close"`)
	require.Contains(t, body, `<span class="breaker-last-failure">connection refused</span>`)
	require.Regexp(t, `<span id="breaker-state">open, probe at \d{4}-`, body)
	require.Equal(t, "open", routeBreaker(t, e, "mail"), "asking changes nothing")
	resp, _ = b.do(t, http.MethodGet, "/console/routes/nope/breaker/close", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, _ = b.do(t, http.MethodPost, "/console/routes/mail/breaker/close", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/console/routes?closed=mail&released=1", resp.Header.Get("Location"))
	_, body = b.do(t, http.MethodGet, resp.Header.Get("Location"), nil)
	require.Contains(t, body, `<p class="flash" id="flash">Circuit of route mail closed; 1 held delivery released.</p>`)
	require.Regexp(t, `(?s)id="route-mail">.*?<td class="route-breaker">closed</td>`, body)

	resp, _ = b.do(t, http.MethodPost, "/console/routes/mail/breaker/close", url.Values{})
	require.Equal(t, "/console/routes?closed=mail", resp.Header.Get("Location"))
	_, body = b.do(t, http.MethodGet, resp.Header.Get("Location"), nil)
	require.Contains(t, body, `id="flash">The circuit of route mail was closed already.</p>`)

	for _, q := range []string{"closed=nope&released=1", "closed=mail&released=-1", "closed=mail&released=x", "closed=%3Cb%3E"} {
		_, body = b.do(t, http.MethodGet, "/console/routes?"+q, nil)
		require.NotContains(t, body, `id="flash"`, q)
	}
}

// routeBreaker is the state of route's breaker, read through the API.
func routeBreaker(t *testing.T, e *env, route string) string {
	t.Helper()
	var got struct {
		Routes []struct {
			Route   string      `json:"route"`
			Breaker breakerView `json:"breaker"`
		} `json:"routes"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &got)
	require.Equal(t, http.StatusOK, status, body)
	for _, r := range got.Routes {
		if r.Route == route {
			return r.Breaker.State
		}
	}
	t.Fatalf("no route %s", route)
	return ""
}
