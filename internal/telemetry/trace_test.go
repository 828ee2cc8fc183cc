package telemetry_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/deliver"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/telemetry"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var providerSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("trace test provider key 32 bytes"))

// TestOneTraceFromProviderToDownstream: a provider's request carrying a
// traceparent is accepted by ingest and delivered by the worker, each built
// as the binaries build them, with tracing to an in-memory exporter. One
// trace holds the provider's request, the claim transaction, the delivery
// attempt (a child of the request) and the downstream request, whose
// traceparent the downstream receives; River's own job span is linked in.
func TestOneTraceFromProviderToDownstream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	tracing := &telemetry.Tracing{Provider: tp, Propagator: propagation.TraceContext{}}

	got := make(chan http.Header, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Test-Method", r.Method)
		got <- h
	}))
	t.Cleanup(down.Close)

	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
providers:
  - name: sw
    scheme: standard-webhooks
    secrets_env: [SW_SECRET]
routes:
  - name: ship
    provider: sw
    events: ["*"]
    url: %s/ship
    method: PUT
`, down.URL)), 0o600))
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	secrets, err := cfg.ResolveSecrets(func(string) string { return providerSecret })
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	db := dbtest.NewDB(t)

	// Ingest, as cmd/ingest wires it.
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	claims := claim.NewGroup(claim.NewStore(db.Pool, jobs, cfg.MaxAttempts), claim.GroupOptions{Timeout: cfg.Ingest.ClaimTimeout.D()})
	table, err := route.New(cfg, secrets.Headers)
	require.NoError(t, err)
	srv, err := ingest.New(cfg, table, secrets, claims, db.Pool, logger, prometheus.NewRegistry())
	require.NoError(t, err)
	front := httptest.NewServer(srv.WithTracing(tracing).Handler())
	t.Cleanup(front.Close)

	// The worker, as cmd/worker wires it.
	delivery, err := deliver.NewWorker(deliver.Options{Config: cfg, DB: db.Pool, Logger: logger, Tracing: tracing})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, delivery)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Logger:     logger,
		Workers:    workers,
		Queues:     deliver.Queues(cfg),
		Middleware: tracing.RiverMiddleware(),
		TestOnly:   true,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	// t.Context() is already cancelled when cleanups run: stop with a
	// context of its own, so that Stop waits for River's goroutines.
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	})

	// The provider's request, part of a trace of its own.
	providerTrace, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	providerSpan, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	body := []byte(`{"type":"order.paid","data":{"id":"o_1"}}`)
	wh, err := standardwebhooks.NewWebhook(providerSecret)
	require.NoError(t, err)
	now := time.Now()
	sig, err := wh.Sign("evt_traced", now, body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, front.URL+"/webhooks/sw", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", "evt_traced")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	req.Header.Set("traceparent", "00-"+providerTrace.String()+"-"+providerSpan.String()+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var h http.Header
	select {
	case h = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the downstream was not called")
	}
	// The attempt's span ends once its outcome is recorded, and River's own
	// span of the job run only after Work has returned.
	byName := func() map[string]tracetest.SpanStub {
		out := map[string]tracetest.SpanStub{}
		for _, s := range exporter.GetSpans() {
			out[s.Name] = s
		}
		return out
	}
	require.Eventually(t, func() bool {
		spans := byName()
		_, attempted := spans["hookgate.attempt"]
		_, ran := spans["river.work"]
		return attempted && ran
	}, 30*time.Second, 10*time.Millisecond, "the attempt's and River's job spans end")
	spans := byName()

	request, claimSpan, attempt, downstream := spans["POST /webhooks/:provider"], spans["hookgate.claim"], spans["hookgate.attempt"], spans["PUT"]
	for name, s := range map[string]tracetest.SpanStub{"request": request, "claim": claimSpan, "attempt": attempt, "downstream": downstream} {
		require.Equal(t, providerTrace, s.SpanContext.TraceID(), "%s span is in the provider's trace", name)
	}
	require.Equal(t, providerSpan, request.Parent.SpanID(), "the request continues the provider's traceparent")
	require.True(t, request.Parent.IsRemote())
	require.Equal(t, trace.SpanKindServer, request.SpanKind)
	require.Equal(t, request.SpanContext.SpanID(), claimSpan.Parent.SpanID(), "the claim is part of the request")
	require.Equal(t, request.SpanContext.SpanID(), attempt.Parent.SpanID(), "the attempt is a child of the accepting request")
	require.Equal(t, attempt.SpanContext.SpanID(), downstream.Parent.SpanID(), "the downstream request is the attempt's")
	require.Equal(t, trace.SpanKindClient, downstream.SpanKind)
	require.Equal(t, "PUT", h.Get("X-Test-Method"))
	require.Contains(t, downstream.Attributes, attribute.String("http.request.method", "PUT"),
		"the downstream span names the route's method")

	want := "00-" + providerTrace.String() + "-" + downstream.SpanContext.SpanID().String() + "-01"
	require.Equal(t, want, h.Get("traceparent"), "the downstream sees the downstream request's span as its parent")

	// River's own span of the job run, linked from the attempt.
	run, ok := spans["river.work"]
	require.True(t, ok, "otelriver's job span")
	require.Len(t, attempt.Links, 1)
	require.Equal(t, run.SpanContext.SpanID(), attempt.Links[0].SpanContext.SpanID())
}
