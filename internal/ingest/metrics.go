package ingest

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/verify"
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
	unavailable       *prometheus.CounterVec
	// businessDuplicates is labelled by route names from the config only.
	businessDuplicates *prometheus.CounterVec
	filtered           *prometheus.CounterVec
}

// otherLabel is the one value that stands for every value not in a label's
// fixed set.
const otherLabel = "other"

// Values of the result label of hookgate_route_filtered_total.
const (
	filterFalse = "false" // the filter yielded something other than true
	filterError = "error" // the filter failed, or the body is not JSON
)

func newMetrics(reg prometheus.Registerer, cfg *config.Config) *metrics {
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
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "ingest_unavailable_total",
			Help: "Verified requests answered 503 because the claim could not be committed.",
		}, []string{"provider"}),
		businessDuplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "business_duplicates_total",
			Help: "Deliveries skipped because another claim holds the route's business key, by route.",
		}, []string{"route"}),
		filtered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hookgate", Name: "route_filtered_total",
			Help: "Events whose type a route takes but whose filter did not match, by route and result (false or error).",
		}, []string{"route", "result"}),
	}
	reg.MustRegister(m.claims, m.duplicates, m.reopened, m.replays, m.signatureFailures, m.inFlight, m.overloaded,
		m.unavailable, m.businessDuplicates, m.filtered)
	m.zero(cfg)
	return m
}

// zero creates, at 0, every series an alert or a dashboard panel reads: per
// configured provider, each known reason and each event type label (those
// a route names exactly, and otherLabel), and per route with a business
// key. A counter that appeared only at its first increment would hide that
// increment from rate() and leave ratios dividing by nothing, at start and
// again after every restart. Route names come from the config only.
func (m *metrics) zero(cfg *config.Config) {
	for _, r := range cfg.Routes {
		if len(r.BusinessKey) > 0 {
			m.businessDuplicates.WithLabelValues(r.Name)
		}
		if r.Filter != "" {
			m.filtered.WithLabelValues(r.Name, filterFalse)
			m.filtered.WithLabelValues(r.Name, filterError)
		}
	}
	for _, p := range cfg.Providers {
		m.duplicates.WithLabelValues(p.Name)
		m.reopened.WithLabelValues(p.Name)
		m.replays.WithLabelValues(p.Name)
		m.unavailable.WithLabelValues(p.Name)
		for _, reason := range verify.UnauthorizedReasons() {
			m.signatureFailures.WithLabelValues(p.Name, reason)
		}
		m.claims.WithLabelValues(p.Name, otherLabel)
		for _, r := range cfg.Routes {
			if r.Provider != p.Name {
				continue
			}
			for _, e := range r.Events {
				if !strings.ContainsAny(e, `*?[\`) {
					m.claims.WithLabelValues(p.Name, e)
				}
			}
		}
	}
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
