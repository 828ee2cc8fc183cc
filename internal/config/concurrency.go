package config

import "fmt"

// MaxConcurrency is the most attempts one worker may run at once on one
// queue: River's own limit on a queue's MaxWorkers.
const MaxConcurrency = 10_000

// defaultConcurrency gives each route that sets no concurrency the worker's.
func (c *Config) defaultConcurrency() {
	for i := range c.Routes {
		if c.Routes[i].Concurrency == 0 {
			c.Routes[i].Concurrency = c.Worker.Concurrency
		}
	}
}

// validateConcurrency checks worker.concurrency's upper bound (its lower one
// is checked with the other worker keys) and each route's concurrency. A
// route that inherits an out-of-range worker.concurrency is reported once,
// under worker.concurrency.
func (c *Config) validateConcurrency(v *validator) {
	if c.Worker.Concurrency > MaxConcurrency {
		v.add("worker.concurrency", "must be at most %d, got %d", MaxConcurrency, c.Worker.Concurrency)
	}
	for i, r := range c.Routes {
		if r.Concurrency == c.Worker.Concurrency {
			continue
		}
		if r.Concurrency < 1 || r.Concurrency > MaxConcurrency {
			v.add(fmt.Sprintf("routes[%d].concurrency", i), "must be between 1 and %d, got %d", MaxConcurrency, r.Concurrency)
		}
	}
}
