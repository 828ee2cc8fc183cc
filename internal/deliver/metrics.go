package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/internal/claim"
)

// runResult is how one delivery job run ended, as the outcome label of
// hookgate_deliveries_total counts it.
type runResult string

const (
	// runCompleted: the downstream answered 2xx and the delivery is completed.
	runCompleted runResult = "completed"
	// runRetry: the attempt failed and another will follow.
	runRetry runResult = "retry"
	// runFailed: the delivery failed for good (rejected, attempts
	// exhausted, route gone, payload gone).
	runFailed runResult = "failed"
	// runSkipped: the job ended without a call because its delivery was
	// no longer processing or no longer exists.
	runSkipped runResult = "skipped"
	// runHeld: the route's circuit is open, or its rate or a Retry-After
	// holds it; the job waits, with no call and no attempt spent.
	runHeld runResult = "held"
)

var runResults = []runResult{runCompleted, runRetry, runFailed, runSkipped, runHeld}

// Metrics are the worker's delivery metrics. Labels are bounded: routes come
// from the config (or from jobs enqueued under an older one), run results
// from a fixed set. A nil *Metrics records nothing.
type Metrics struct {
	deliveries        *prometheus.CounterVec
	attemptDuration   *prometheus.HistogramVec
	claimToCompletion prometheus.Histogram
	endBatch          prometheus.Histogram
	rateWait          *prometheus.HistogramVec
}

// NewMetrics registers the delivery metrics with reg and creates the series
// of routes at zero, so that rates exist before the first delivery.
func NewMetrics(reg prometheus.Registerer, routes []string) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "deliveries_total",
			Help: "Delivery job runs by route and outcome: completed, retry, failed, skipped or held (by the route's open circuit, rate or Retry-After).",
		}, []string{"route", "outcome"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hookgate", Name: "attempt_duration_seconds",
			Help:    "Duration of downstream calls, by route, whatever their answer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		claimToCompletion: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "hookgate", Name: "claim_to_completion_seconds",
			Help:    "Time from an event's first acceptance by ingest to the completion of one of its deliveries, retries included.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}),
		endBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "hookgate", Name: "job_end_batch_size",
			Help:    "Delivery jobs ended (outcome recorded, job completed) per transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		rateWait: newRateWait(),
	}
	reg.MustRegister(m.deliveries, m.attemptDuration, m.claimToCompletion, m.endBatch, m.rateWait)
	m.zero(routes)
	return m
}

// zero creates, at 0, every series an alert or a dashboard panel reads: one
// per configured route and outcome. A series that appeared only at its first
// increment would hide that increment from rate(), at start and again after
// every restart.
func (m *Metrics) zero(routes []string) {
	for _, r := range routes {
		m.attemptDuration.WithLabelValues(r)
		m.rateWait.WithLabelValues(r)
		for _, res := range runResults {
			m.deliveries.WithLabelValues(r, string(res))
		}
	}
}

// countRun counts one job run of route that ended as res.
func (m *Metrics) countRun(route string, res runResult) {
	if m != nil {
		m.deliveries.WithLabelValues(route, string(res)).Inc()
	}
}

func (m *Metrics) attempt(route string, d time.Duration) {
	if m != nil {
		m.attemptDuration.WithLabelValues(route).Observe(d.Seconds())
	}
}

func (m *Metrics) batch(n int) {
	if m != nil {
		m.endBatch.Observe(float64(n))
	}
}

func (m *Metrics) completed(sinceClaim time.Duration) {
	if m != nil {
		m.claimToCompletion.Observe(max(sinceClaim, 0).Seconds())
	}
}

// BacklogCollector reports hookgate_claims_processing,
// hookgate_oldest_processing_claim_age_seconds and
// hookgate_deliveries_waiting (by configured route), measured at each scrape so
// that they are true whichever worker replica is scraped. The query uses the
// partial index on processing claims and is bounded by a timeout; when it
// fails, the scrape reports the error for these metrics and still
// serves the others.
type BacklogCollector struct {
	backlog    func(context.Context, []string) (claim.BacklogCounts, error)
	routes     []string
	timeout    time.Duration
	logger     *slog.Logger
	processing *prometheus.Desc
	oldestAge  *prometheus.Desc
	waiting    *prometheus.Desc
}

// NewBacklogCollector returns a collector that measures with backlog (e.g.
// claim.Store.Backlog), giving each measurement timeout. The waiting gauge
// has one series per route of routes (the configured ones), 0 when none waits.
func NewBacklogCollector(backlog func(context.Context, []string) (claim.BacklogCounts, error), routes []string,
	timeout time.Duration, logger *slog.Logger,
) *BacklogCollector {
	return &BacklogCollector{
		backlog: backlog,
		routes:  routes,
		timeout: timeout,
		logger:  logger,
		processing: prometheus.NewDesc("hookgate_claims_processing",
			"Claims with at least one delivery still processing.", nil, nil),
		oldestAge: prometheus.NewDesc("hookgate_oldest_processing_claim_age_seconds",
			"Age of the oldest claim still processing; 0 when none.", nil, nil),
		waiting: prometheus.NewDesc("hookgate_deliveries_waiting",
			"Deliveries waiting for the routes they run after to complete, by route.", []string{"route"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.processing
	ch <- c.oldestAge
	ch <- c.waiting
}

// Collect implements prometheus.Collector.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b, err := c.backlog(ctx, c.routes)
	if err != nil {
		c.logger.Warn("measuring the backlog for metrics failed", slog.String("error", err.Error()))
		ch <- prometheus.NewInvalidMetric(c.processing, err)
		ch <- prometheus.NewInvalidMetric(c.oldestAge, err)
		ch <- prometheus.NewInvalidMetric(c.waiting, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.processing, prometheus.GaugeValue, float64(b.Processing))
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, b.OldestAge.Seconds())
	for _, r := range c.routes {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(b.Waiting[r]), r)
	}
}
