package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rateWaitBuckets are hookgate_route_rate_wait_seconds's buckets: from a
// token's refill at high rates to a long Retry-After.
var rateWaitBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newRateWait() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "hookgate", Name: "route_rate_wait_seconds",
		Help: "Time delivery job runs waited for their route's rate or a Retry-After hold, by route: " +
			"the wait in line of a run that was let through, or that wait plus the snooze of one held back.",
		Buckets: rateWaitBuckets,
	}, []string{"route"})
}

// rateWaited records that a run of route waited d for the rate.
func (m *Metrics) rateWaited(route string, d time.Duration) {
	if m != nil {
		m.rateWait.WithLabelValues(route).Observe(max(d, 0).Seconds())
	}
}

// HeldCollector reports hookgate_route_held_deliveries{route}: the route's
// deliveries whose jobs are snoozed (River's scheduled state on the route's
// queue), held by its open circuit, its rate or a Retry-After. One series
// per configured route, read from Postgres at each scrape (so true
// whichever replica is scraped); when the read fails, the scrape reports
// the error for this metric only.
type HeldCollector struct {
	held    func(context.Context, []string) (map[string]int, error)
	routes  []string
	timeout time.Duration
	logger  *slog.Logger
	desc    *prometheus.Desc
}

// NewHeldCollector returns a collector that counts with held (e.g.
// claim.Store.RouteHeld), giving each read timeout.
func NewHeldCollector(held func(context.Context, []string) (map[string]int, error), routes []string,
	timeout time.Duration, logger *slog.Logger,
) *HeldCollector {
	return &HeldCollector{held: held, routes: routes, timeout: timeout, logger: logger,
		desc: prometheus.NewDesc("hookgate_route_held_deliveries",
			"Deliveries of the route held back (snoozed, no attempt spent) by its open circuit, its rate or a Retry-After.",
			[]string{"route"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *HeldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *HeldCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	held, err := c.held(ctx, c.routes)
	if err != nil {
		c.logger.Warn("counting the routes' held deliveries for metrics failed", slog.String("error", err.Error()))
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, r := range c.routes {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(held[r]), r)
	}
}
