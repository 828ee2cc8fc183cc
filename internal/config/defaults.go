package config

import (
	"cmp"
	"net/http"
	"time"
)

func (c *Config) setDefaults() {
	c.Ingest.Listen = cmp.Or(c.Ingest.Listen, ":8080")
	c.Ingest.MaxBodyBytes = cmp.Or(c.Ingest.MaxBodyBytes, 1<<20)
	c.Ingest.ClaimTimeout = cmp.Or(c.Ingest.ClaimTimeout, Duration(5*time.Second))
	c.Ingest.MaxInFlight = cmp.Or(c.Ingest.MaxInFlight, 256)
	c.Worker.Listen = cmp.Or(c.Worker.Listen, ":9091")
	c.Worker.Concurrency = cmp.Or(c.Worker.Concurrency, 100)
	c.Worker.RescueAfter = cmp.Or(c.Worker.RescueAfter, Duration(10*time.Minute))
	c.Worker.ShutdownTimeout = cmp.Or(c.Worker.ShutdownTimeout, Duration(30*time.Second))
	c.Worker.ReconcileInterval = cmp.Or(c.Worker.ReconcileInterval, Duration(time.Minute))
	c.Retention.Claims = cmp.Or(c.Retention.Claims, Duration(90*24*time.Hour))
	c.Retention.Payloads = cmp.Or(c.Retention.Payloads, Duration(7*24*time.Hour))
	c.Retention.Interval = cmp.Or(c.Retention.Interval, Duration(time.Hour))
	c.Retention.BatchSize = cmp.Or(c.Retention.BatchSize, 1000)
	for i := range c.Providers {
		p := &c.Providers[i]
		p.Tolerance = cmp.Or(p.Tolerance, Duration(5*time.Minute))
		p.OnFailedRedelivery = cmp.Or(p.OnFailedRedelivery, RedeliveryReopen)
		p.ReplayGuard = cmp.Or(p.ReplayGuard, p.defaultReplayGuard())
		if p.Reconcile != nil {
			p.Reconcile.setDefaults(p.Scheme)
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		r.Timeout = cmp.Or(r.Timeout, Duration(10*time.Second))
		r.MaxAttempts = cmp.Or(r.MaxAttempts, 10)
		r.Backoff.Initial = cmp.Or(r.Backoff.Initial, Duration(time.Second))
		r.Backoff.Max = cmp.Or(r.Backoff.Max, Duration(time.Hour))
		r.Method = cmp.Or(r.Method, http.MethodPost)
		r.IdempotencyHeader = cmp.Or(r.IdempotencyHeader, DefaultIdempotencyHeader)
		r.Breaker.setDefaults()
	}
	c.defaultConcurrency()
	c.Console.setDefaults()
}
