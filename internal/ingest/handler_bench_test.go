package ingest_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
)

// claimedAtOnce answers every claim as new, at once: the handler's own path
// is what BenchmarkHandler measures; the claim transaction is
// BenchmarkIngest's (internal/bench), on a real database.
type claimedAtOnce struct{}

func (claimedAtOnce) Claim(context.Context, claim.Event, []string, bool) (claim.Result, error) {
	return claim.Result{Decision: claim.Claimed}, nil
}

// BenchmarkHandler is one signed Stripe event through the webhook handler,
// as the binary serves it (its middleware, metrics and the per-request log
// line at the shipped level, info, written as JSON), the claim answered at
// once. Its allocs/op is the hot path's allocation count and does not
// depend on the machine's load: go test -run '^$' -bench Handler -benchmem
// ./internal/ingest.
func BenchmarkHandler(b *testing.B) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		b.Fatal(err)
	}
	secrets, err := cfg.ResolveSecrets(func(k string) string { return map[string]string{"T_STRIPE": handlerSecret}[k] })
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	table, err := route.New(cfg, secrets.Headers)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := ingest.New(cfg, table, secrets, claimedAtOnce{}, nil, logger, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	body := []byte(`{"id": "evt_bench", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: handlerSecret, Timestamp: time.Now()})
	req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", nil)
	req.Header.Set("Stripe-Signature", sp.Header)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	rd := bytes.NewReader(body)
	req.Body = io.NopCloser(rd)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// discardWriter is a reusable http.ResponseWriter that keeps only the
// status, so that the benchmark counts the handler's allocations, not a
// recorder's.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(code int) { w.code = code }
