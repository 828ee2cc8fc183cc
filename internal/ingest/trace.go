package ingest

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookgate/hookgate/internal/telemetry"
)

// webhookRoute names the webhook request's span and its http.route.
const webhookRoute = "/webhooks/:provider"

// tracer holds what ingest traces with; its zero value traces nothing and
// costs nothing.
type tracer struct {
	t    trace.Tracer
	prop propagation.TextMapPropagator
}

// WithTracing makes the server trace each webhook request and its claim
// transaction, and carry the request's trace context into the metadata of
// the jobs it enqueues, so that each delivery attempt is a child of the
// request. Call it before serving. Off (nil or disabled), nothing is traced.
//
// The endpoint is public, so a request starts a trace of its own: a caller
// cannot attach spans to a trace of its choosing, nor force sampling with
// its traceparent's flag, nor have its tracestate forwarded downstream. The
// provider's traceparent becomes a link of the request's span, added only
// once the request's signature is verified (linkCaller).
func (s *Server) WithTracing(t *telemetry.Tracing) *Server {
	if t.Enabled() {
		s.tracer = tracer{t: t.Tracer("github.com/hookgate/hookgate/internal/ingest"), prop: t.Propagator}
	}
	return s
}

// callerKey holds, in a request's context, the trace context its caller
// sent, until the signature says whether to link it.
type callerKey struct{}

// startRequest starts the span of a webhook request, as the root of a new
// trace. Nothing the client chose names it, labels it or parents it: the
// route is the template, the provider is set only once it is known to be
// configured, and the caller's trace context is only kept aside in ctx for
// linkCaller.
func (tr tracer) startRequest(ctx context.Context, h http.Header) (context.Context, trace.Span) {
	if tr.t == nil {
		return ctx, nil
	}
	caller := trace.SpanContextFromContext(tr.prop.Extract(context.Background(), propagation.HeaderCarrier(h)))
	ctx, span := tr.t.Start(ctx, http.MethodPost+" "+webhookRoute, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", http.MethodPost), attribute.String("http.route", webhookRoute)))
	if caller.IsValid() {
		ctx = context.WithValue(ctx, callerKey{}, caller)
	}
	return ctx, span
}

// linkCaller links the request's span to the trace context its caller
// sent, if any. Call it only once the signature is verified: an
// unauthenticated caller leaves no mark on the trace. The link carries the
// caller's trace and span ids, not its tracestate.
func linkCaller(ctx context.Context) {
	caller, ok := ctx.Value(callerKey{}).(trace.SpanContext)
	if !ok {
		return
	}
	trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: caller.WithTraceState(trace.TraceState{}),
		Attributes: []attribute.KeyValue{attribute.String("hookgate.link", "provider")}})
}

// endRequest records how the request ended and ends its span.
func endRequest(span trace.Span, provider, eventID, outcome string, status int) {
	if span == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.Int("http.response.status_code", status), attribute.String("hookgate.result", outcome)}
	if provider != "" {
		attrs = append(attrs, attribute.String("hookgate.provider", provider))
	}
	if eventID != "" {
		attrs = append(attrs, attribute.String("hookgate.event_id", eventID))
	}
	span.SetAttributes(attrs...)
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// jobMetadata returns the River job metadata that carries ctx's trace
// context (traceparent, as River's otelriver middleware reads it), or nil.
func (tr tracer) jobMetadata(ctx context.Context) []byte {
	if tr.t == nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	tr.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	b, _ := json.Marshal(carrier) // a map of strings always marshals
	return b
}

// startClaim starts the span of the claim transaction.
func (tr tracer) startClaim(ctx context.Context, provider, eventID string, routes int) (context.Context, trace.Span) {
	if tr.t == nil {
		return ctx, nil
	}
	return tr.t.Start(ctx, "hookgate.claim", trace.WithAttributes(
		attribute.String("hookgate.provider", provider), attribute.String("hookgate.event_id", eventID),
		attribute.Int("hookgate.routes", routes)))
}

// endClaim records the claim's outcome, or its error, and ends its span.
func endClaim(span trace.Span, outcome string, err error) {
	if span == nil {
		return
	}
	if err != nil {
		// The error names what failed, never SQL or a secret.
		span.SetStatus(codes.Error, "claim transaction failed")
	} else {
		span.SetAttributes(attribute.String("hookgate.outcome", outcome))
	}
	span.End()
}
