package ingest

import "github.com/prometheus/client_golang/prometheus"

// metrics are ingest's own counters; request counts and latency come from
// the echoprometheus middleware. Labels are bounded: providers come from the
// config, event types only from verified requests, reasons from a fixed set.
type metrics struct {
	claims            *prometheus.CounterVec
	duplicates        *prometheus.CounterVec
	reopened          *prometheus.CounterVec
	signatureFailures *prometheus.CounterVec
	// businessDuplicates is labelled by route names from the config only.
	businessDuplicates *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "claims_created_total",
			Help: "Events claimed for the first time, by provider and event type.",
		}, []string{"provider", "event_type"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "duplicates_total",
			Help: "Requests for an already claimed event, acknowledged without effect.",
		}, []string{"provider"}),
		reopened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "claims_reopened_total",
			Help: "Redeliveries of failed events that reopened their failed deliveries.",
		}, []string{"provider"}),
		signatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "signature_failures_total",
			Help: "Requests rejected with 401, by provider and reason.",
		}, []string{"provider", "reason"}),
		businessDuplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "business_duplicates_total",
			Help: "Deliveries skipped because another claim holds the route's business key, by route.",
		}, []string{"route"}),
	}
	reg.MustRegister(m.claims, m.duplicates, m.reopened, m.signatureFailures, m.businessDuplicates)
	return m
}
