package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stripe/stripe-go/v82/webhook"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// BenchmarkIngestTracing measures unique signed events through the real
// HTTP server with tracing off and with tracing on (every request sampled,
// spans batched to an in-memory exporter), on one database in one run, and
// reports on/off. Requests carry a traceparent either way. The phases run
// in rounds of off, on, on, off (BENCH_TRACING_ROUNDS, default 2), sharing
// BENCH_INGEST_EVENTS (default 20000) among them, so that table growth and
// the machine's other load weigh on both alike.
func BenchmarkIngestTracing(b *testing.B) {
	ctx := context.Background()
	rounds := envInt("BENCH_TRACING_ROUNDS", 2)
	n := envInt("BENCH_INGEST_EVENTS", 20000) / (4 * rounds)
	db := dbtest.NewDB(b)
	// A pool sized as the binaries size theirs (cmd/internal/cli.DefaultMaxConns).
	pcfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	getenv := func(k string) string { return map[string]string{"BENCH_STRIPE": benchSecret}[k] }
	cfg, err := config.Parse([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	secrets, err := cfg.ResolveSecrets(getenv)
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(pool, jobs, func(string) int { return 10 })
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	defer tp.Shutdown(ctx) //nolint:errcheck // in memory

	serve := func(tracing *telemetry.Tracing) string {
		table, err := route.New(cfg, secrets.Headers)
		if err != nil {
			b.Fatal(err)
		}
		srv, err := ingest.New(cfg, table, secrets, ingest.NewGroup(store, ingest.GroupOptions{}), pool, discardLogger(), prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: srv.WithTracing(tracing).Handler()}
		go hs.Serve(ln) //nolint:errcheck // closed at cleanup
		b.Cleanup(func() { _ = hs.Close() })
		return "http://" + ln.Addr().String() + "/webhooks/stripe"
	}
	off := serve(nil)
	on := serve(&telemetry.Tracing{Provider: tp, Propagator: propagation.TraceContext{}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}

	post := func(url, id string) error {
		body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_%s"}}}`, id, id)
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", sp.Header)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	phaseOf := func(name, tag, url string) phase {
		p, err := hammer(name, n, func(i int) error { return post(url, fmt.Sprintf("evt_%s_%d", tag, i)) })
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	for j, url := range []string{off, on} {
		if _, err := hammer("warm-up", 2*concurrency, func(i int) error { return post(url, fmt.Sprintf("evt_warm%d_%d", j, i)) }); err != nil {
			b.Fatal(err)
		}
	}

	b.ResetTimer()
	var offs, ons []phase
	for r := range rounds {
		offs = append(offs, phaseOf(fmt.Sprintf("tracing off (%d)", 2*r+1), fmt.Sprintf("off%d", 2*r+1), off))
		ons = append(ons, phaseOf(fmt.Sprintf("tracing on  (%d)", 2*r+1), fmt.Sprintf("on%d", 2*r+1), on))
		ons = append(ons, phaseOf(fmt.Sprintf("tracing on  (%d)", 2*r+2), fmt.Sprintf("on%d", 2*r+2), on))
		offs = append(offs, phaseOf(fmt.Sprintf("tracing off (%d)", 2*r+2), fmt.Sprintf("off%d", 2*r+2), off))
	}
	b.StopTimer()
	if err := tp.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
	if spans, want := len(exporter.GetSpans()), 2*len(ons)*n; spans < want {
		b.Fatalf("expected at least %d spans (request and claim per traced event), got %d", want, spans)
	}

	rate := func(ps ...phase) float64 {
		var events int
		var secs float64
		for _, p := range ps {
			events += p.n
			secs += p.elapsed.Seconds()
		}
		return float64(events) / secs
	}
	ratio := rate(ons...) / rate(offs...)
	fmt.Fprintf(os.Stdout, "\ningest with tracing, %d concurrent connections, %d events per phase\n", concurrency, n)
	for i := range offs {
		fmt.Fprintln(os.Stdout, offs[i])
		fmt.Fprintln(os.Stdout, ons[i])
	}
	fmt.Fprintf(os.Stdout, "off %.0f req/s, on %.0f req/s: ratio on/off = %.2f   (target >= 0.9)\n\n", rate(offs...), rate(ons...), ratio)
	b.ReportMetric(rate(offs...), "off_req/s")
	b.ReportMetric(rate(ons...), "on_req/s")
	b.ReportMetric(ratio, "on/off")
}
