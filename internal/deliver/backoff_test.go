package deliver

import (
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

func TestNthInterval(t *testing.T) {
	t.Parallel()
	// The intervals cenkalti's ExponentialBackOff steps through with the
	// same parameters and no jitter.
	for _, tt := range []struct{ initial, max time.Duration }{
		{100 * time.Millisecond, time.Second},
		{time.Second, 30 * time.Second},
		{time.Second, time.Second},
		{3 * time.Second, time.Hour},
	} {
		eb := backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(tt.initial),
			backoff.WithMultiplier(backoffMultiplier),
			backoff.WithRandomizationFactor(0),
			backoff.WithMaxInterval(tt.max),
			backoff.WithMaxElapsedTime(0),
		)
		for n := 1; n <= 40; n++ {
			require.Equal(t, eb.NextBackOff(), nthInterval(tt.initial, tt.max, n), "initial %s, max %s, n=%d", tt.initial, tt.max, n)
		}
	}
	require.Equal(t, time.Hour, nthInterval(time.Second, time.Hour, 1_000_000))
	require.Equal(t, time.Second, nthInterval(time.Second, time.Hour, 0), "n below 1 is treated as 1")
	require.Equal(t, time.Duration(1<<62), nthInterval(1, 1<<62, 63))
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	b := config.Backoff{Initial: config.Duration(100 * time.Millisecond), Max: config.Duration(time.Second)}

	t.Run("GrowsWithinJitterBoundsAndStaysUnderMax", func(t *testing.T) {
		t.Parallel()
		for n := 1; n <= 12; n++ {
			interval := min(100*time.Millisecond<<(n-1), time.Second)
			lo, hi := interval/2, min(interval*3/2, time.Second)
			for range 200 {
				d := retryDelay(b, n, 0)
				require.GreaterOrEqual(t, d, lo, "n=%d", n)
				require.LessOrEqual(t, d, hi, "n=%d", n)
			}
		}
	})

	t.Run("IsJittered", func(t *testing.T) {
		t.Parallel()
		seen := map[time.Duration]bool{}
		for range 50 {
			seen[retryDelay(b, 2, 0)] = true
		}
		require.Greater(t, len(seen), 10, "50 draws gave only %d distinct delays", len(seen))
	})

	t.Run("HugeAttemptCountsAreCheapAndCapped", func(t *testing.T) {
		t.Parallel()
		d := retryDelay(b, 1_000_000, 0)
		require.GreaterOrEqual(t, d, 500*time.Millisecond)
		require.LessOrEqual(t, d, time.Second)
		require.Positive(t, retryDelay(b, 0, 0), "n below 1 is treated as 1")
	})

	t.Run("RetryAfterWinsWhenLongerCappedByMax", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 700*time.Millisecond, retryDelay(b, 1, 700*time.Millisecond))
		require.Equal(t, time.Second, retryDelay(b, 1, time.Hour))
		// A short Retry-After does not shorten the backoff.
		require.GreaterOrEqual(t, retryDelay(b, 4, time.Millisecond), 400*time.Millisecond)
	})
}

func TestNextRetry(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Worker: config.Worker{RescueAfter: config.Duration(time.Minute)},
		Routes: []config.Route{{
			Name: "ship", Timeout: config.Duration(10 * time.Second),
			Backoff: config.Backoff{Initial: config.Duration(time.Second), Max: config.Duration(30 * time.Second)},
		}},
	}
	w, err := NewWorker(Options{Config: cfg})
	require.NoError(t, err)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w.now = func() time.Time { return now }
	job := func(id int64, route string, errs int) *river.Job[claim.DeliveryArgs] {
		return &river.Job[claim.DeliveryArgs]{
			JobRow: &rivertype.JobRow{ID: id, Errors: make([]rivertype.AttemptError, errs)},
			Args:   claim.DeliveryArgs{Provider: "stripe", EventID: "evt_1", Route: route},
		}
	}

	t.Run("FirstRetryNearInitial", func(t *testing.T) {
		t.Parallel()
		d := w.NextRetry(job(1, "ship", 0)).Sub(now)
		require.GreaterOrEqual(t, d, 500*time.Millisecond)
		require.LessOrEqual(t, d, 1500*time.Millisecond)
	})

	t.Run("CountsEarlierErrors", func(t *testing.T) {
		t.Parallel()
		// Fourth failure: interval 8s, jittered to [4s, 12s].
		d := w.NextRetry(job(2, "ship", 3)).Sub(now)
		require.GreaterOrEqual(t, d, 4*time.Second)
		require.LessOrEqual(t, d, 12*time.Second)
	})

	t.Run("RetryAfterHintIsUsedOnce", func(t *testing.T) {
		t.Parallel()
		w.putHint(3, 20*time.Second)
		require.Equal(t, now.Add(20*time.Second), w.NextRetry(job(3, "ship", 0)))
		require.LessOrEqual(t, w.NextRetry(job(3, "ship", 0)).Sub(now), 1500*time.Millisecond)
	})

	t.Run("RetryAfterHintCappedByMax", func(t *testing.T) {
		t.Parallel()
		w.putHint(4, time.Hour)
		require.Equal(t, now.Add(30*time.Second), w.NextRetry(job(4, "ship", 0)))
	})

	t.Run("UnknownRouteLeavesItToRiver", func(t *testing.T) {
		t.Parallel()
		require.True(t, w.NextRetry(job(5, "gone", 0)).IsZero())
	})
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Worker: config.Worker{RescueAfter: config.Duration(time.Hour)},
		Routes: []config.Route{
			{Name: "fast", Timeout: config.Duration(2 * time.Second)},
			{Name: "slow", Timeout: config.Duration(10 * time.Second)},
		},
	}
	w, err := NewWorker(Options{Config: cfg})
	require.NoError(t, err)
	job := func(route string) *river.Job[claim.DeliveryArgs] {
		return &river.Job[claim.DeliveryArgs]{JobRow: &rivertype.JobRow{}, Args: claim.DeliveryArgs{Route: route}}
	}
	require.Equal(t, 7*time.Second, w.Timeout(job("fast")), "the route's timeout and 5s of grace")
	require.Equal(t, 15*time.Second, w.Timeout(job("slow")))
	require.Zero(t, w.Timeout(job("gone")))
	require.Equal(t, 15*time.Second, JobTimeout(cfg))

	cfg.Worker.RescueAfter = config.Duration(12 * time.Second)
	require.Equal(t, 2600*time.Millisecond, w.Timeout(job("fast")), "a short rescue_after has a short grace")
	cfg.Worker.RescueAfter = config.Duration(10 * time.Second)
	require.Equal(t, 10*time.Second, JobTimeout(cfg), "capped by rescue_after")
}

// TestRunEndsBeforeRescue: for every config that validates, a delivery run
// returns before River's rescuer could take its job: its job's timeout (the
// route's timeout and the grace), then at most two record transactions.
// River's completion of a run sets its job's state by id, whatever the
// attempt (TestStaleRunEndsTheNewerRunsJob), so a run that outlived
// rescue_after would end the job of the run that replaced it.
func TestRunEndsBeforeRescue(t *testing.T) {
	t.Parallel()
	for _, rescueAfter := range []time.Duration{4 * time.Second, 30 * time.Second, time.Minute, 10 * time.Minute, time.Hour} {
		// The longest route timeout the config accepts, to the millisecond.
		var longest time.Duration
		for lo, hi := time.Duration(0), rescueAfter/time.Millisecond; lo <= hi; {
			mid := (lo + hi) / 2
			if valid(t, rescueAfter, mid*time.Millisecond) {
				longest, lo = mid*time.Millisecond, mid+1
			} else {
				hi = mid - 1
			}
		}
		require.Positive(t, longest, "rescue_after %s accepts no route timeout", rescueAfter)
		cfg, err := config.Parse(timeoutConfig(rescueAfter, longest))
		require.NoError(t, err)
		w, err := NewWorker(Options{Config: cfg})
		require.NoError(t, err)
		job := &river.Job[claim.DeliveryArgs]{JobRow: &rivertype.JobRow{}, Args: claim.DeliveryArgs{Route: "ship"}}
		run := w.Timeout(job) + w.ends.wait
		require.Less(t, run, rescueAfter, "rescue_after %s, route timeout %s: a run may last %s", rescueAfter, longest, run)
	}
}

func valid(t *testing.T, rescueAfter, timeout time.Duration) bool {
	t.Helper()
	_, err := config.Parse(timeoutConfig(rescueAfter, timeout))
	return err == nil
}

func timeoutConfig(rescueAfter, timeout time.Duration) []byte {
	return []byte(fmt.Sprintf(`
worker: {rescue_after: %s}
providers:
  - {name: github, scheme: github, secrets_env: [GITHUB_SECRET]}
routes:
  - {name: ship, provider: github, events: ["*"], url: "http://127.0.0.1:1/ship", timeout: %s}
`, rescueAfter, timeout))
}
