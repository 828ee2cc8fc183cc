package config

import (
	"fmt"
	"time"
)

// Rate paces a route: at most Limit requests per Per to it, all workers
// together (the state is in Postgres, beside the breaker's), plus Burst
// more once after the route was idle. A delivery held back by the rate
// waits, still processing, and spends none of its attempts. Absent (nil),
// the route is not paced; only its concurrency bounds it.
type Rate struct {
	// Limit is how many requests the route is sent per Per. At least 1.
	Limit int `yaml:"limit"`
	// Per is the window of Limit: at least 100ms.
	Per Duration `yaml:"per"`
	// Burst is how many requests beyond Limit an idle route may be sent at
	// once. Default 0.
	Burst int `yaml:"burst"`
}

// MinRatePer is the shortest window of a route's rate.
const MinRatePer = 100 * time.Millisecond

// MaxRateLimit bounds a route's rate limit and burst: past a million
// requests per window the rate is no longer what holds the route back.
const MaxRateLimit = 1_000_000

// rate checks a route's rate; key is routes[i].rate.
func (v *validator) rate(key string, r *Rate) {
	if r == nil {
		return
	}
	if r.Limit < 1 || r.Limit > MaxRateLimit {
		v.add(key+".limit", "must be between 1 and %d, got %d", MaxRateLimit, r.Limit)
	}
	if r.Per.D() < MinRatePer {
		v.add(key+".per", "must be at least %s, got %s", MinRatePer, r.Per.D())
	}
	if r.Burst < 0 || r.Burst > MaxRateLimit {
		v.add(key+".burst", "must be between 0 and %d, got %d", MaxRateLimit, r.Burst)
	}
}

// String is the rate as the docs write it: "5 per 1s, burst 5".
func (r Rate) String() string {
	return fmt.Sprintf("%d per %s, burst %d", r.Limit, r.Per.D(), r.Burst)
}
