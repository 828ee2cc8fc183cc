package deliver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/deliver"
)

// TestRetryAfterHoldsTheRouteAnHourAtMost: a 429 asking for a day holds
// the whole route for an hour (maxRouteHold, on a route whose backoff.max
// is longer), on the route's rate row; the
// 429'd run counts as a failed attempt, and another delivery of the route
// is then snoozed with no request sent and no attempt spent.
func TestRetryAfterHoldsTheRouteAnHourAtMost(t *testing.T) {
	t.Parallel()
	b := setupDB(t, status(http.StatusOK))
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "86400")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(api.Close)
	b.cfg.Routes[0].URL = api.URL
	// A hold is never longer than the route's backoff.max either (the
	// 429'd delivery's own retry is capped so); here that is longer.
	b.cfg.Routes[0].Backoff.Max = config.Duration(3 * time.Hour)
	b.claimed(t, "evt_429", "ship")
	b.claimed(t, "evt_held", "ship")

	run := func(id string) error {
		t.Helper()
		tx, err := b.db.Pool.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
		w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
		require.NoError(t, err)
		defer w.Close()
		err = w.Work(rivertest.WorkContext(t.Context(), b.client), b.fetch(t, tx, b.job(t, tx, id, "ship")))
		require.NoError(t, tx.Commit(t.Context()))
		return err
	}
	start := time.Now()
	require.Error(t, run("evt_429"), "the 429'd attempt fails as any retryable answer")
	rates, err := b.store.Rates(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.NotNil(t, rates["ship"].HeldUntil)
	require.WithinDuration(t, start.Add(time.Hour), *rates["ship"].HeldUntil, 10*time.Second, "a day's Retry-After holds the route an hour")

	var snooze *river.JobSnoozeError
	require.ErrorAs(t, run("evt_held"), &snooze, "held: snoozed, its attempt given back")
	require.Greater(t, snooze.Duration, 59*time.Minute)
	require.Equal(t, int32(1), calls.Load(), "nothing is sent to a held route")
	require.Equal(t, 0, delivery(t, b.db.Pool, "evt_held", "ship").AttemptCount)
}
