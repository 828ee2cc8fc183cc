package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/internal/claim"
)

// BreakerCollector reports hookgate_route_breaker_open{route}: 1 while a
// route's circuit is open or half-open, else 0, one series per configured
// route (so bounded by the config). It is read from Postgres at each
// scrape, so that it is true whichever replica is scraped; when the read
// fails, the scrape reports the error for this metric only.
type BreakerCollector struct {
	breakers func(context.Context, []string) (map[string]claim.Breaker, error)
	routes   []string
	timeout  time.Duration
	logger   *slog.Logger
	open     *prometheus.Desc
}

// NewBreakerCollector returns a collector that reads with breakers (e.g.
// claim.Store.Breakers), giving each read timeout.
func NewBreakerCollector(breakers func(context.Context, []string) (map[string]claim.Breaker, error), routes []string,
	timeout time.Duration, logger *slog.Logger,
) *BreakerCollector {
	return &BreakerCollector{breakers: breakers, routes: routes, timeout: timeout, logger: logger,
		open: prometheus.NewDesc("hookgate_route_breaker_open",
			"1 while the route's circuit breaker is open or half-open (nothing but a probe is sent), else 0.", []string{"route"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *BreakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.open }

// Collect implements prometheus.Collector.
func (c *BreakerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	bs, err := c.breakers(ctx, c.routes)
	if err != nil {
		c.logger.Warn("reading the routes' breakers for metrics failed", slog.String("error", err.Error()))
		ch <- prometheus.NewInvalidMetric(c.open, err)
		return
	}
	for _, r := range c.routes {
		v := 0.0
		if s := bs[r].State; s == claim.BreakerOpen || s == claim.BreakerHalfOpen {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, v, r)
	}
}
