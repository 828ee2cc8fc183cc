package deliver

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/hookgate/hookgate/internal/config"
)

// Parameters of the exponential backoff, in cenkalti/backoff's terms.
const (
	backoffMultiplier    = 2
	backoffRandomization = 0.5
)

// retryDelay is how long to wait after the n-th failed attempt of a job
// (n ≥ 1) before the next one: the n-th step of an exponential backoff that
// starts at b.Initial, doubles, is jittered by ±50% and never exceeds b.Max.
// A Retry-After the downstream asked for (hint) wins when it is longer, but
// is capped by b.Max as well, so a downstream cannot park a delivery for
// longer than the operator allowed.
func retryDelay(b config.Backoff, n int, hint time.Duration) time.Duration {
	// cenkalti's ExponentialBackOff would reach the n-th interval by
	// drawing n times; one draw from a backoff that starts there is the
	// same distribution, at the cost of one. It is built on every call: it
	// is stateful and not safe for concurrent use, and River may ask for
	// several jobs' next retries at once.
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(nthInterval(b.Initial.D(), b.Max.D(), n)),
		backoff.WithMultiplier(backoffMultiplier),
		backoff.WithRandomizationFactor(backoffRandomization),
		backoff.WithMaxInterval(b.Max.D()),
		backoff.WithMaxElapsedTime(0), // never Stop; max_attempts ends retries
	)
	// MaxInterval caps the interval before jitter, so a draw can land above it.
	return min(max(eb.NextBackOff(), hint), b.Max.D())
}

// nthInterval is the interval, before jitter, of cenkalti's n-th step
// (n ≥ 1; less counts as 1): initial·2^(n-1), and max once that reaches it.
func nthInterval(initial, maxInterval time.Duration, n int) time.Duration {
	shift := max(n, 1) - 1
	// initial<<shift ≥ maxInterval, asked without overflowing.
	if shift >= 62 || initial >= maxInterval>>shift {
		return maxInterval
	}
	return initial << shift
}
