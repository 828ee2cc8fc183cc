package ingest

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are ingest's own counters; request counts and latency come from
// the echoprometheus middleware. No label takes a value an unauthenticated
// client chose: providers are counted only once found in the config, event
// types only from verified requests and only when a route names them
// (otherLabel else), reasons come from a fixed set.
type metrics struct {
	claims            *prometheus.CounterVec
	duplicates        *prometheus.CounterVec
	reopened          *prometheus.CounterVec
	replays           *prometheus.CounterVec
	signatureFailures *prometheus.CounterVec
	inFlight          prometheus.Gauge
	overloaded        prometheus.Counter
	// businessDuplicates is labelled by route names from the config only.
	businessDuplicates *prometheus.CounterVec
}

// otherLabel is the one value that stands for every value not in a label's
// fixed set.
const otherLabel = "other"

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
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "replays_total",
			Help: "Verified requests whose body is byte-identical to an existing claim's under another event id (replay_guard: body), acknowledged as duplicates without effect.",
		}, []string{"provider"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hookgate", Subsystem: "ingest", Name: "in_flight",
			Help: "Webhook requests being read or claimed now (bounded by ingest.max_in_flight).",
		}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "hookgate", Subsystem: "ingest", Name: "overloaded_total",
			Help: "Webhook requests answered 503 unread because ingest.max_in_flight were in flight.",
		}),
		signatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "signature_failures_total",
			Help: "Requests rejected with 401, by provider and reason.",
		}, []string{"provider", "reason"}),
		businessDuplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "business_duplicates_total",
			Help: "Deliveries skipped because another claim holds the route's business key, by route.",
		}, []string{"route"}),
	}
	reg.MustRegister(m.claims, m.duplicates, m.reopened, m.replays, m.signatureFailures, m.inFlight, m.overloaded,
		m.businessDuplicates)
	return m
}

// methods are the HTTP methods counted under their own name; any other is
// counted as otherLabel, since the method is the client's to make up.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true,
}

func methodLabel(m string) string {
	if methods[m] {
		return m
	}
	return otherLabel
}
