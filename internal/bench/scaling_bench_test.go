package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// BenchmarkScaling measures, on one Postgres and one database, the rate of
// 1, 2 and 4 ingest processes taking unique signed events (64 connections
// spread over them), then of 1, 2 and 4 worker processes draining
// pre-accepted events to an instant downstream. Each phase has
// BENCH_SCALING_EVENTS events (default 6000). Every process has its own
// pool (pool_max_conns 20, the default). docs/scaling.md reads the curve.
func BenchmarkScaling(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_SCALING_EVENTS", 6000)
	db := dbtest.NewDB(b)
	bins := buildBinaries(b)
	down := newSink(b)
	cfgPath := writeConfig(b, down.URL, workerConcurrency())
	start := func(name string) (*process, string) {
		addr := proctest.FreeAddr(b)
		cmd := exec.Command(filepath.Join(bins.dir, name), "--config", cfgPath, "--listen", addr)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+db.URL, "BENCH_STRIPE="+benchSecret, "HOOKGATE_LOG_LEVEL=error")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		p := &process{cmd: cmd, done: make(chan error, 1)}
		go func() { p.done <- cmd.Wait() }()
		b.Cleanup(func() { p.stop(b) })
		proctest.WaitHealthy(b, "http://"+addr+"/healthz", p.done)
		return p, "http://" + addr
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	post := func(base, id string) error {
		body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_%s"}}}`, id, id)
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
		return postStripe(client, base+"/webhooks/stripe", body, sp.Header)
	}
	// No worker runs while ingest is measured: its jobs wait, and are
	// deleted before the worker phases.
	counts := []int{1, 2, 4}
	var ingestRates []phase
	b.ResetTimer()
	for _, k := range counts {
		var procs []*process
		var bases []string
		for range k {
			p, base := start("ingest")
			procs, bases = append(procs, p), append(bases, base)
		}
		if _, err := hammer("warm-up", 2*concurrency, func(i int) error { return post(bases[i%k], fmt.Sprintf("evt_warm%d_%d", k, i)) }); err != nil {
			b.Fatal(err)
		}
		p, err := hammer(fmt.Sprintf("%d ingest", k), n, func(i int) error { return post(bases[i%k], fmt.Sprintf("evt_ingest%d_%d", k, i)) })
		if err != nil {
			b.Fatal(err)
		}
		ingestRates = append(ingestRates, p)
		for _, p := range procs {
			p.stop(b)
		}
	}
	b.StopTimer()
	if _, err := db.Pool.Exec(ctx, `TRUNCATE river_job, webhook_business_keys, webhook_deliveries, webhook_event_claims`); err != nil {
		b.Fatal(err)
	}

	inserter, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(db.Pool, inserter, func(string) int { return 10 })
	workerRates := map[int]float64{}
	for i, k := range counts {
		prefix := fmt.Sprintf("evt_drain%d", k)
		if _, err := hammer("accept", n, func(i int) error {
			id := fmt.Sprintf("%s_%d", prefix, i)
			_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid",
				ContentType: "application/json", Payload: fmt.Appendf(nil, `{"id":%q}`, id)}, []string{"sink"}, true)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var procs []*process
		for range k {
			p, _ := start("worker")
			procs = append(procs, p)
		}
		waitDrained(b, db.Pool, down, (i+1)*n)
		b.StopTimer()
		workerRates[k] = spanRate(b, db.Pool, fmt.Sprintf(`SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE event_id LIKE '%s\_%%'`, prefix))
		for _, p := range procs {
			p.stop(b)
		}
	}

	fmt.Fprintf(os.Stdout, "\nscaling on one Postgres, %d events per phase, pool_max_conns 20 per process\n", n)
	for i, p := range ingestRates {
		fmt.Fprintf(os.Stdout, "%d ingest: %7.0f events/s (x%.2f)  p50 %6.1f ms  p99 %6.1f ms\n",
			counts[i], p.rate(), p.rate()/ingestRates[0].rate(), ms(p.pct(0.5)), ms(p.pct(0.99)))
	}
	for _, k := range counts {
		fmt.Fprintf(os.Stdout, "%d worker: %7.0f deliveries/s (x%.2f), %d job slots\n", k, workerRates[k], workerRates[k]/workerRates[1], k*workerConcurrency())
	}
	fmt.Fprintln(os.Stdout)
	for i, k := range counts {
		b.ReportMetric(ingestRates[i].rate(), fmt.Sprintf("ingest%d_req/s", k))
		b.ReportMetric(workerRates[k], fmt.Sprintf("worker%d_events/s", k))
	}
}
