package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookgate/hookgate/internal/claim"
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
// OldestQueuedDelivery), giving each measurement timeout.
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

// OldestQueuedDelivery returns a measurement of the age of the oldest
// delivery job that is due and not yet fetched, counted from the time it
// became due. That is an available job, or a scheduled or retryable one
// whose time has come: River's leader makes those available, so with every
// worker down they stay scheduled, and they must count all the same. Jobs
// in a paused queue (a paused route) wait on purpose and do not count. It
// uses River's job and queue lists, not its tables.
func OldestQueuedDelivery(client *river.Client[pgx.Tx]) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		queues, err := client.QueueList(ctx, river.NewQueueListParams().First(10000))
		if err != nil {
			return 0, fmt.Errorf("listing queues: %w", err)
		}
		paused := []string{}
		for _, q := range queues.Queues {
			if q.PausedAt != nil {
				paused = append(paused, q.Name)
			}
		}
		params := river.NewJobListParams().
			Kinds(claim.DeliveryKind).
			States(rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable).
			Where("scheduled_at <= now() AND NOT queue = ANY(@paused::text[])", river.NamedArgs{"paused": paused}).
			OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).
			First(1)
		res, err := client.JobList(ctx, params)
		if err != nil {
			return 0, fmt.Errorf("listing the oldest queued delivery job: %w", err)
		}
		if len(res.Jobs) == 0 {
			return 0, nil
		}
		return max(time.Since(res.Jobs[0].ScheduledAt), 0), nil
	}
}
