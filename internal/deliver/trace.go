package deliver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// tracer holds what the worker traces with; its zero value traces nothing
// and costs nothing.
type tracer struct {
	t    trace.Tracer
	prop propagation.TextMapPropagator
}

func newTracer(t *telemetry.Tracing) tracer {
	if !t.Enabled() {
		return tracer{}
	}
	return tracer{t: t.Tracer("github.com/hookgate/hookgate/internal/deliver"), prop: t.Propagator}
}

// startAttempt starts the span of one job run: a child of the request that
// accepted the event, whose trace context ingest left in the job's
// metadata, and linked to River's own span of the run (otelriver's
// river.work, which is in ctx).
func (tr tracer) startAttempt(ctx context.Context, job *river.Job[claim.DeliveryArgs]) (context.Context, trace.Span) {
	if tr.t == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("hookgate.provider", job.Args.Provider),
			attribute.String("hookgate.event_id", job.Args.EventID),
			attribute.String("hookgate.route", job.Args.Route),
			attribute.Int("hookgate.job_attempt", job.Attempt),
		),
	}
	if run := trace.SpanContextFromContext(ctx); run.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: run}))
	}
	if parent := tr.accepted(job.Metadata); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return tr.t.Start(ctx, "hookgate.attempt", opts...)
}

// accepted reads the trace context ingest stored in a job's metadata.
func (tr tracer) accepted(metadata []byte) trace.SpanContext {
	var meta map[string]any
	if len(metadata) == 0 || json.Unmarshal(metadata, &meta) != nil {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{}
	for _, k := range tr.prop.Fields() {
		if v, ok := meta[k].(string); ok {
			carrier[k] = v
		}
	}
	// Ingest stores its own request's context, whose tracestate is empty;
	// a job enqueued by an older ingest may still carry the provider's,
	// which is never forwarded downstream.
	return trace.SpanContextFromContext(tr.prop.Extract(context.Background(), carrier)).WithTraceState(trace.TraceState{})
}

// endAttempt records the run's error, if any, and ends its span.
func endAttempt(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "attempt did not complete the delivery")
	}
	span.End()
}

// startDownstream starts the client span of route r's downstream request,
// named by its method as OpenTelemetry's HTTP conventions name client spans;
// inject then writes its traceparent into the request's headers.
func (tr tracer) startDownstream(ctx context.Context, r *route.Route) (context.Context, trace.Span) {
	if tr.t == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.String("hookgate.route", r.Name)}
	if u, err := url.Parse(r.URL); err == nil {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	}
	return tr.t.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// inject writes ctx's trace context (traceparent) into h.
func (tr tracer) inject(ctx context.Context, h http.Header) {
	if tr.t != nil {
		tr.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// endDownstream records the answer and ends the span.
func endDownstream(span trace.Span, o callResult) {
	if span == nil {
		return
	}
	if o.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", o.status))
	}
	if !o.verdict.delivers() {
		span.SetStatus(codes.Error, o.verdict.String())
	}
	span.End()
}
