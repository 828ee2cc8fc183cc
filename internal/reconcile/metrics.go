package reconcile

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of hookgate_reconciled_events_total.
const (
	// OutcomeClaimed: a Stripe event no webhook brought, claimed.
	OutcomeClaimed = "claimed"
	// OutcomeRedelivered: a failed GitHub delivery GitHub was asked to redeliver.
	OutcomeRedelivered = "redelivered"
	// OutcomeAlreadyClaimed: listed, and already claimed: left alone.
	OutcomeAlreadyClaimed = "already_claimed"
	// OutcomeDelivered: a GitHub delivery that succeeded (or was already
	// redelivered): left alone.
	OutcomeDelivered = "delivered"
	// OutcomeUnrouted: an event of a type none of the provider's routes takes.
	OutcomeUnrouted = "unrouted"
	// OutcomeRefused: an event ingest would refuse (too large, no valid id).
	OutcomeRefused = "refused"
)

// Metrics count what reconciliation found. A nil *Metrics counts nothing.
type Metrics struct {
	events *prometheus.CounterVec
	runs   *prometheus.CounterVec
}

// NewMetrics registers hookgate_reconciled_events_total{provider,outcome}
// and hookgate_reconcile_runs_total{provider,result} with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "reconciled_events_total",
			Help: "Events (Stripe) or deliveries (GitHub) reconciliation listed, by what it did with them: claimed and redelivered are events the provider never delivered.",
		}, []string{"provider", "outcome"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "reconcile_runs_total",
			Help: "Reconciliation runs (not dry), by result: ok or failed.",
		}, []string{"provider", "result"}),
	}
	reg.MustRegister(m.events, m.runs)
	return m
}

func (m *Metrics) event(provider, outcome string) {
	if m != nil {
		m.events.WithLabelValues(provider, outcome).Inc()
	}
}

func (m *Metrics) run(provider string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.runs.WithLabelValues(provider, result).Inc()
}

// init makes every series of providers, at zero, so that an alert on
// their increase sees the first failure.
func (m *Metrics) init(providers []string) {
	if m == nil {
		return
	}
	for _, p := range providers {
		for _, o := range []string{OutcomeClaimed, OutcomeRedelivered, OutcomeAlreadyClaimed} {
			m.events.WithLabelValues(p, o)
		}
		m.runs.WithLabelValues(p, "ok")
		m.runs.WithLabelValues(p, "failed")
	}
}
