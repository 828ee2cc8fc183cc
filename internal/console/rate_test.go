package console_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// heldClaim makes a processing claim of provider with a delivery to route
// whose job is snoozed for an hour, as the breaker or the rate leaves it.
func heldClaim(t *testing.T, e *env, provider, route string) claim.EventKey {
	t.Helper()
	k := testfactory.Claim(t.Context(), t, e.db.Pool, &testfactory.ClaimOpts{Provider: provider,
		Deliveries: map[string]*testfactory.DeliveryOpts{route: {}}})
	jobs, err := river.NewClient(riverpgxv5.New(e.db.Pool), &river.Config{})
	require.NoError(t, err)
	_, err = jobs.Insert(t.Context(), claim.DeliveryArgs{Provider: k.Provider, EventID: k.EventID, Route: route},
		&river.InsertOpts{Queue: claim.Queue(route), ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return k
}

type rateRoute struct {
	Route string `json:"route"`
	Rate  *struct {
		Limit     int        `json:"limit"`
		Per       string     `json:"per"`
		Burst     int        `json:"burst"`
		HeldUntil *time.Time `json:"held_until"`
	} `json:"rate"`
	Held      int        `json:"held"`
	HeldUntil *time.Time `json:"held_until"`
	Backlog   int        `json:"backlog"`
}

// TestRateAndHeldShown: GET /api/v1/routes gives a paced route's rate and
// every route's held deliveries (apart from the backlog) and Retry-After
// hold; the routes page and the overview show them, and a held claim's page
// says what holds its delivery and until when: the rate, a Retry-After or
// an open circuit.
func TestRateAndHeldShown(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, func(c *config.Config) {
		c.Routes[1].Rate = &config.Rate{Limit: 5, Per: config.Duration(time.Second), Burst: 2}
	}, nil)
	paced := heldClaim(t, e, "github", "mail")
	open := heldClaim(t, e, "stripe", "ship")
	openBreaker(t, e, "ship")
	routes := func() map[string]rateRoute {
		t.Helper()
		var got struct {
			Routes []rateRoute `json:"routes"`
		}
		status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &got)
		require.Equal(t, http.StatusOK, status, body)
		out := map[string]rateRoute{}
		for _, r := range got.Routes {
			out[r.Route] = r
		}
		return out
	}
	got := routes()
	require.NotNil(t, got["mail"].Rate)
	require.Equal(t, 5, got["mail"].Rate.Limit)
	require.Equal(t, "1s", got["mail"].Rate.Per)
	require.Equal(t, 2, got["mail"].Rate.Burst)
	require.Nil(t, got["mail"].Rate.HeldUntil)
	require.Nil(t, got["ship"].Rate, "ship is not paced")
	require.Equal(t, 1, got["mail"].Held)
	require.Equal(t, 1, got["ship"].Held)
	require.Zero(t, got["mail"].Backlog, "held deliveries are counted apart from the backlog")

	b := browser(t, e)
	b.signIn(t, "bob", secrets["T_BOB"])
	_, body := b.do(t, http.MethodGet, "/console/claims/github/"+paced.EventID, nil)
	require.Contains(t, body, "held by the route&#39;s rate until ")
	_, body = b.do(t, http.MethodGet, "/console/claims/stripe/"+open.EventID, nil)
	require.Contains(t, body, "held by an open circuit until ")

	until, err := e.store.RateHold(t.Context(), "mail", time.Minute)
	require.NoError(t, err)
	got = routes()
	require.WithinDuration(t, until, *got["mail"].HeldUntil, time.Millisecond)
	require.WithinDuration(t, until, *got["mail"].Rate.HeldUntil, time.Millisecond)
	_, body = b.do(t, http.MethodGet, "/console/claims/github/"+paced.EventID, nil)
	require.Contains(t, body, "held by the downstream&#39;s Retry-After until ")

	_, body = b.do(t, http.MethodGet, "/console/routes", nil)
	require.Regexp(t, `(?s)id="route-mail">.*?<td class="route-rate">5 per 1s, burst 2</td>.*?<td class="route-held">1 <span class="held-until">held by a Retry-After until \d{4}-`, body)
	require.Regexp(t, `(?s)id="route-ship">.*?<td class="route-rate">none</td>.*?<td class="route-held">1 <span class="held-until">by an open circuit until \d{4}-`, body)
	_, body = b.do(t, http.MethodGet, "/console/", nil)
	require.Contains(t, body, `<td class="route-held">1</td>`)
}
