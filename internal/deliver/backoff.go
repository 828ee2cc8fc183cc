package deliver

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/hookgate/hookgate/internal/config"
)

// retryDelay is how long to wait after the n-th failed attempt of a job
// (n ≥ 1) before the next one: the n-th step of an exponential backoff that
// starts at b.Initial, doubles, is jittered by ±50% and never exceeds b.Max.
// A Retry-After the downstream asked for (hint) wins when it is longer, but
// is capped by b.Max as well, so a downstream cannot park a delivery for
// longer than the operator allowed.
//
// The backoff is rebuilt on every call: it is stateful and not safe for
// concurrent use, and River may ask for several jobs' next retries at once.
// Stepping it n times costs at most 64 draws; by then any interval has
// reached b.Max.
func retryDelay(b config.Backoff, n int, hint time.Duration) time.Duration {
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(b.Initial.D()),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxInterval(b.Max.D()),
		backoff.WithMaxElapsedTime(0), // never Stop; max_attempts ends retries
	)
	d := b.Initial.D()
	for range min(max(n, 1), 64) {
		d = eb.NextBackOff()
	}
	// MaxInterval caps the interval before jitter, so a draw can land above it.
	return min(max(d, hint), b.Max.D())
}
