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
	"sync"
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
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var providerSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("trace test provider key 32 bytes"))

// TestOneTraceFromProviderToDownstream: a provider's request carrying a
// traceparent and a tracestate is accepted by ingest and delivered by the
// worker, each built as the binaries build them, with tracing to an
// in-memory exporter. One trace of hookgate's own holds the provider's
// request (its root, linked to the provider's span), the claim transaction,
// the delivery attempt (a child of the request) and the downstream request,
// whose traceparent the downstream receives, without the provider's
// tracestate; River's own job span is linked in.
func TestOneTraceFromProviderToDownstream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	tracing := &telemetry.Tracing{Provider: tp, Propagator: propagation.TraceContext{}}

	got := make(chan http.Header, 1)
	// jobMeta reads the running job's metadata while the downstream has the
	// call: a delivery's end deletes the job's row.
	var jobMeta func(eventID string) string
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Test-Method", r.Method)
		h.Set("X-Test-Job-Metadata", jobMeta(r.Header.Get("Hookgate-Event-Id")))
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
	jobMeta = func(eventID string) string {
		jobs, err := testfactory.ListJobs(context.Background(), db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: "sw", EventID: eventID}})
		if err != nil {
			return "reading the job: " + err.Error()
		}
		if len(jobs) != 1 {
			return fmt.Sprintf("%d jobs of %s", len(jobs), eventID)
		}
		return string(jobs[0].Metadata)
	}

	// Ingest, as cmd/ingest wires it.
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	claims := ingest.NewGroup(claim.NewStore(db.Pool, jobs, cfg.MaxAttempts), ingest.GroupOptions{Timeout: cfg.Ingest.ClaimTimeout.D()})
	table, err := route.New(cfg, secrets.Headers)
	require.NoError(t, err)
	srv, err := ingest.New(cfg, table, secrets, claims, db.Pool, logger, prometheus.NewRegistry())
	require.NoError(t, err)
	front := httptest.NewServer(srv.WithTracing(tracing).Handler())
	t.Cleanup(front.Close)

	// The worker, as cmd/worker wires it.
	delivery, err := deliver.NewWorker(deliver.Options{Config: cfg, DB: db.Pool, Logger: logger, Tracing: tracing})
	require.NoError(t, err)
	t.Cleanup(delivery.Close)
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
	req.Header.Set("tracestate", "vendor=provider-secret-state")
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
	ours := request.SpanContext.TraceID()
	require.NotEqual(t, providerTrace, ours, "the request starts a trace of its own")
	for name, s := range map[string]tracetest.SpanStub{"request": request, "claim": claimSpan, "attempt": attempt, "downstream": downstream} {
		require.Equal(t, ours, s.SpanContext.TraceID(), "%s span is in the request's trace", name)
		require.Empty(t, s.SpanContext.TraceState().String(), "%s span carries no tracestate", name)
	}
	require.False(t, request.Parent.IsValid(), "the request's span is a root")
	require.Len(t, request.Links, 1, "the verified provider's span is linked")
	require.Equal(t, providerTrace, request.Links[0].SpanContext.TraceID())
	require.Equal(t, providerSpan, request.Links[0].SpanContext.SpanID())
	require.Empty(t, request.Links[0].SpanContext.TraceState().String(), "the link keeps no tracestate")
	require.Equal(t, trace.SpanKindServer, request.SpanKind)
	require.Equal(t, request.SpanContext.SpanID(), claimSpan.Parent.SpanID(), "the claim is part of the request")
	require.Equal(t, request.SpanContext.SpanID(), attempt.Parent.SpanID(), "the attempt is a child of the accepting request")
	require.Equal(t, attempt.SpanContext.SpanID(), downstream.Parent.SpanID(), "the downstream request is the attempt's")
	require.Equal(t, trace.SpanKindClient, downstream.SpanKind)
	require.Equal(t, "PUT", h.Get("X-Test-Method"))
	require.Contains(t, downstream.Attributes, attribute.String("http.request.method", "PUT"),
		"the downstream span names the route's method")

	want := "00-" + ours.String() + "-" + downstream.SpanContext.SpanID().String() + "-01"
	require.Equal(t, want, h.Get("traceparent"), "the downstream sees the downstream request's span as its parent")
	require.Empty(t, h.Values("tracestate"), "the provider's tracestate is not forwarded")
	meta := h.Get("X-Test-Job-Metadata")
	require.Contains(t, meta, "traceparent", "the running job's metadata was read")
	require.NotContains(t, meta, "provider-secret-state", "nor kept in the job")

	// River's own span of the job run, linked from the attempt.
	run, ok := spans["river.work"]
	require.True(t, ok, "otelriver's job span")
	require.Len(t, attempt.Links, 1)
	require.Equal(t, run.SpanContext.SpanID(), attempt.Links[0].SpanContext.SpanID())

	// A job enqueued by an older ingest, which kept the provider's
	// tracestate in its metadata: the attempt does not forward it either.
	_, err = testfactory.ClaimEvent(ctx, claim.NewStore(db.Pool, jobs, cfg.MaxAttempts), claim.Event{Provider: "sw", ID: "evt_old_job",
		Type: "order.paid", Payload: body, JobMetadata: []byte(`{"traceparent":"00-` + providerTrace.String() + `-` +
			providerSpan.String() + `-01","tracestate":"vendor=provider-secret-state"}`)}, []string{"ship"}, false)
	require.NoError(t, err)
	select {
	case h = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the downstream was not called for the old job")
	}
	require.Equal(t, "evt_old_job", h.Get("Hookgate-Event-Id"))
	require.Empty(t, h.Values("tracestate"), "an old job's tracestate is not forwarded")
}

// tracedIngest serves ingest, wired as cmd/ingest wires it, tracing with
// tp, for one standard-webhooks provider "sw" with one route.
func tracedIngest(t *testing.T, tp trace.TracerProvider) string {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
providers:
  - name: sw
    scheme: standard-webhooks
    secrets_env: [SW_SECRET]
routes:
  - name: ship
    provider: sw
    events: ["*"]
    url: http://127.0.0.1:1/ship
`), 0o600))
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	secrets, err := cfg.ResolveSecrets(func(string) string { return providerSecret })
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	db := dbtest.NewDB(t)
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	claims := ingest.NewGroup(claim.NewStore(db.Pool, jobs, cfg.MaxAttempts), ingest.GroupOptions{Timeout: cfg.Ingest.ClaimTimeout.D()})
	table, err := route.New(cfg, secrets.Headers)
	require.NoError(t, err)
	srv, err := ingest.New(cfg, table, secrets, claims, db.Pool, logger, prometheus.NewRegistry())
	require.NoError(t, err)
	front := httptest.NewServer(srv.WithTracing(&telemetry.Tracing{Provider: tp, Propagator: propagation.TraceContext{}}).Handler())
	t.Cleanup(front.Close)
	return front.URL
}

// postTraced posts a standard-webhooks event signed with secret, carrying
// traceparent, and returns the status.
func postTraced(t *testing.T, url, id, secret, traceparent string) int {
	t.Helper()
	body := []byte(`{"type":"order.paid","data":{"id":"` + id + `"}}`)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/sw", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// recordingSampler is a sampler that remembers each of its decisions, made
// when a span starts (before the request is answered).
type recordingSampler struct {
	sdktrace.Sampler
	mu        sync.Mutex
	decisions []sdktrace.SamplingDecision
}

func (s *recordingSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	r := s.Sampler.ShouldSample(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, r.Decision)
	return r
}

// TestUnverifiedCallerLeavesNoMarkOnTheTrace: a request whose signature
// fails, carrying a sampled traceparent, is traced in a trace of its own,
// with no parent and no link to the caller's; and where the sampler keeps
// only what a sampled parent asks for, a caller's sampled flag, verified or
// not, samples nothing.
func TestUnverifiedCallerLeavesNoMarkOnTheTrace(t *testing.T) {
	t.Parallel()
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent := "00-" + callerTrace + "-00f067aa0ba902b7-01"

	t.Run("its own trace, no link", func(t *testing.T) {
		t.Parallel()
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		url := tracedIngest(t, tp)
		require.Equal(t, http.StatusUnauthorized, postTraced(t, url, "evt_forged", "whsec_"+base64.StdEncoding.EncodeToString([]byte("not the provider's key, 32 bytes")), traceparent))
		require.Eventually(t, func() bool { return len(exporter.GetSpans()) == 1 }, 10*time.Second, 5*time.Millisecond,
			"the request's span ends")
		span := exporter.GetSpans()[0]
		require.Equal(t, "POST /webhooks/:provider", span.Name)
		require.Contains(t, span.Attributes, attribute.Int("http.response.status_code", http.StatusUnauthorized))
		require.NotEqual(t, callerTrace, span.SpanContext.TraceID().String(), "the caller chose no trace id")
		require.False(t, span.Parent.IsValid(), "a root span")
		require.Empty(t, span.Links, "an unverified caller is not linked")
	})

	t.Run("the caller's flag samples nothing", func(t *testing.T) {
		t.Parallel()
		sampler := &recordingSampler{Sampler: sdktrace.ParentBased(sdktrace.NeverSample())}
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(sampler))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		url := tracedIngest(t, tp)
		require.Equal(t, http.StatusUnauthorized, postTraced(t, url, "evt_forged", "whsec_"+base64.StdEncoding.EncodeToString([]byte("not the provider's key, 32 bytes")), traceparent))
		require.Equal(t, http.StatusOK, postTraced(t, url, "evt_real", providerSecret, traceparent))
		sampler.mu.Lock()
		defer sampler.mu.Unlock()
		require.NotEmpty(t, sampler.decisions, "the requests' spans were started")
		for i, d := range sampler.decisions {
			require.Equal(t, sdktrace.Drop, d, "span %d was not sampled", i)
		}
	})
}
