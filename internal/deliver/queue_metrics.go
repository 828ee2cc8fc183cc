package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueCollector reports hookgate_delivery_queue_oldest_age_seconds: how
// long the oldest delivery job that is due has been waiting for a worker.
// It grows when workers are too few, stopped, or paused, while
// hookgate_oldest_processing_claim_age_seconds also grows with retries that
// are waiting out their backoff. Measured at each scrape, bounded by a
// timeout; when the query fails the scrape reports the error for this one
// metric and still serves the others.
type QueueCollector struct {
	oldest  func(context.Context) (time.Duration, error)
	timeout time.Duration
	logger  *slog.Logger
	desc    *prometheus.Desc
}

// NewQueueCollector returns a collector that measures with oldest (e.g.
// claim.OldestDueDelivery), giving each measurement timeout.
func NewQueueCollector(oldest func(context.Context) (time.Duration, error), timeout time.Duration, logger *slog.Logger) *QueueCollector {
	return &QueueCollector{
		oldest:  oldest,
		timeout: timeout,
		logger:  logger,
		desc: prometheus.NewDesc("hookgate_delivery_queue_oldest_age_seconds",
			"Time the oldest due delivery job has been waiting for a worker; 0 when none waits.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	age, err := c.oldest(ctx)
	if err != nil {
		c.logger.Warn("measuring the delivery queue for metrics failed", slog.String("error", err.Error()))
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, age.Seconds())
}
