// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, the one place both binaries read them. Tracing is
// off unless they ask for it; off, nothing is exported and no span is made.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is what the servers trace with. The zero value, and a nil
// *Tracing, trace nothing.
type Tracing struct {
	// Provider makes the spans; nil when tracing is off.
	Provider trace.TracerProvider
	// Propagator reads and writes trace context in headers and job
	// metadata. Only W3C trace context: baggage from a provider's request is
	// never forwarded downstream.
	Propagator propagation.TextMapPropagator

	shutdown func(context.Context) error
}

// Enabled reports whether spans are made.
func (t *Tracing) Enabled() bool { return t != nil && t.Provider != nil }

// Tracer returns the tracer of package name, or nil when tracing is off.
func (t *Tracing) Tracer(name string) trace.Tracer {
	if !t.Enabled() {
		return nil
	}
	return t.Provider.Tracer(name)
}

// Shutdown flushes the spans not yet exported; it is a no-op when off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("flushing traces: %w", err)
	}
	return nil
}

// FlushGrace bounds how long Flush waits for the spans to be exported.
const FlushGrace = 5 * time.Second

// Flush exports the spans still buffered, for FlushGrace at most, even once
// ctx has ended: the binaries flush on their way out, after a signal ended
// their context. A failure is logged, there being no one left to return it
// to.
func (t *Tracing) Flush(ctx context.Context, logger *slog.Logger) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushGrace)
	defer cancel()
	if err := t.Shutdown(fctx); err != nil {
		logger.Warn("traces not flushed", slog.String("error", err.Error()))
	}
}

// RiverMiddleware returns River's own OpenTelemetry middleware (a
// river.work span per job run, linked to the span that enqueued it through
// the job's metadata), or nothing when tracing is off. Its metrics are not
// recorded: Prometheus has hookgate's.
func (t *Tracing) RiverMiddleware() []rivertype.Middleware {
	if !t.Enabled() {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider:         t.Provider,
		MeterProvider:          metricnoop.NewMeterProvider(),
		EnableTracePropagation: true,
	})}
}

// Requested reports whether the environment asks for traces: an OTLP
// endpoint, or an OTEL_TRACES_EXPORTER other than none, and the SDK not
// disabled (OTEL_SDK_DISABLED=true).
func Requested(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New returns the tracing the environment asks for (see Requested), with
// service the default service.name (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it). The exporter, its protocol and
// endpoint, and the sampler come from the standard variables
// (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER), read
// from the process environment by the OpenTelemetry SDK. Without them it
// returns an off Tracing.
func New(ctx context.Context, getenv func(string) string, service string) (*Tracing, error) {
	if !Requested(getenv) {
		return &Tracing{}, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("setting up trace export from OTEL_* variables: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("reading OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, shutdown: tp.Shutdown}, nil
}
