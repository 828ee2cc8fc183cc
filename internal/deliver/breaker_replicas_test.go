package deliver

import (
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/route"
)

// TestBreakersOfTwoReplicasFollowAnswerOrder: two replicas' breakers on one
// route, failures answered on one and deliveries on the other in turn.
// The delivering replica's copy of the row (read a moment before, within
// its one second) shows no failure, yet each of its deliveries resets the
// count: a failures: 3 circuit never opens, and the failure answered
// after the last delivery is the only one counted.
func TestBreakersOfTwoReplicasFollowAnswerOrder(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfg, routes := shipWithBreaker(t, 4)
	logger := slog.New(slog.DiscardHandler)
	failing := newBreakers(db.Pool, cfg, routes, logger, time.Second)
	delivering := newBreakers(db.Pool, cfg, routes, logger, time.Second)
	job := &river.Job[claim.DeliveryArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 5},
		Args: claim.DeliveryArgs{Provider: "stripe", EventID: "evt_1", Route: "ship"}}
	pass := func(b *breakers) *gate {
		g, err := b.admit(t.Context(), job)
		require.NoError(t, err, "the circuit is closed")
		require.NotNil(t, g)
		return g
	}
	delivering.cached(t.Context(), "ship") // its copy: closed, no failures
	for range 4 {
		failing.record(t.Context(), pass(failing), retryable, true, time.Now(), "")
		delivering.record(t.Context(), pass(delivering), delivered, true, time.Now(), "")
	}
	failing.record(t.Context(), pass(failing), retryable, true, time.Now(), "")
	bs, err := claim.NewStore(db.Pool, nil, nil).Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Equal(t, claim.BreakerClosed, bs["ship"].State, "never three consecutive failures")
	require.Equal(t, 1, bs["ship"].Failures)
}

// shipWithBreaker is a worker of concurrency slots with one route, ship,
// whose breaker opens after 3 failures and stays open an hour.
func shipWithBreaker(t *testing.T, concurrency int) (*config.Config, *route.Table) {
	t.Helper()
	cfg := &config.Config{
		Worker: config.Worker{Concurrency: concurrency, RescueAfter: config.Duration(time.Minute)},
		Routes: []config.Route{{Name: "ship", Provider: "stripe", Events: []string{"*"}, URL: "http://127.0.0.1:1/ship",
			Timeout: config.Duration(2 * time.Second), MaxAttempts: 5,
			Breaker: config.Breaker{Failures: 3, CoolDown: config.Duration(time.Hour), MaxCoolDown: config.Duration(time.Hour)}}},
	}
	routes, err := route.New(cfg, nil)
	require.NoError(t, err)
	return cfg, routes
}
