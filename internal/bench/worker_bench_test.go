package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// The worker binary's River settings (cmd/worker), which the no-op baseline
// uses too so that only the work per job differs.
const (
	fetchCooldown     = 5 * time.Millisecond
	fetchPollInterval = 200 * time.Millisecond
)

// workerConcurrency is worker.concurrency for both drains: 100 (the
// default), or BENCH_CONCURRENCY.
func workerConcurrency() int { return envInt("BENCH_CONCURRENCY", 100) }

type noopArgs struct{ N int }

func (noopArgs) Kind() string { return "bench.noop" }

// noopWorker does nothing but count its runs.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	runs atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.runs.Add(1)
	return nil
}

// BenchmarkWorker measures, on one database in one run:
//
//	(a) River itself draining N no-op jobs, with the worker's settings,
//	(b) the worker binary draining N pre-accepted events against an
//	    instant local downstream,
//	(c) claim-to-completion latency at a light steady load (20 events/s),
//	(d) as (b), to a route whose jq body program reshapes each event, in
//	    drains taking turns with raw ones (b'): body, raw, raw, body.
//
// Drain rates are taken between the first and last completion, so process
// start-up counts for neither. N is BENCH_WORKER_EVENTS (default 5000); run
// it with -benchtime 1x.
func BenchmarkWorker(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_WORKER_EVENTS", 5000)
	db := dbtest.NewDB(b)

	// (a) River's own throughput for a no-op job.
	b.ResetTimer()
	riverRate := riverNoopDrain(b, db.Pool, n)
	b.StopTimer()

	// (b) the worker binary draining pre-accepted events.
	down := newSink(b)
	inserter, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{FetchCooldown: insertNotifyCooldown})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(db.Pool, inserter, func(string) int { return 10 })
	acceptTo := func(route, prefix string, i int) error {
		id := fmt.Sprintf("%s_%d", prefix, i)
		_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "bench", ID: id, Type: "checkout.session.completed",
			ContentType: "application/json", Payload: checkoutPayload(id)}, []string{route}, true)
		return err
	}
	accept := func(prefix string, i int) error { return acceptTo("sink", prefix, i) }
	if _, err := hammer("accept", n, func(i int) error { return accept("evt_drain", i) }); err != nil {
		b.Fatal(err)
	}
	worker := startWorker(b, db.URL, down.URL)
	b.StartTimer()
	waitDrained(b, db.Pool, down, n)
	b.StopTimer()
	// Where a job's time goes: a no-op job's run is River's fetch to its
	// completion; a delivery's, from its call's start to its end's commit
	// (the call, the batched end), read from the attempt history: the end
	// deletes the delivery's job row, and River's timestamps with it.
	var noopRunning float64
	if err := db.Pool.QueryRow(ctx, `SELECT avg(extract(epoch FROM finalized_at - attempted_at)) FROM river_job
WHERE kind = 'bench.noop'`).Scan(&noopRunning); err != nil {
		b.Fatal(err)
	}
	running := attemptRunning(b, db.Pool, "evt_drain")
	hookgateRate := spanRate(b, db.Pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE route = 'sink'`)
	if effects := down.effects(); effects != n {
		b.Fatalf("downstream saw %d distinct keys, want %d", effects, n)
	}

	// (c) claim-to-completion at a light steady load.
	const light, rate = 200, 20
	tick := time.NewTicker(time.Second / rate)
	for i := range light {
		<-tick.C
		if err := accept("evt_light", i); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	waitDrained(b, db.Pool, down, n+light)
	lat := phase{name: "(c) claim-to-completion, 20 events/s"}
	rows, err := db.Pool.Query(ctx, `SELECT extract(epoch FROM d.completed_at - c.first_seen_at)
FROM webhook_deliveries d JOIN webhook_event_claims c USING (provider, event_id)
WHERE c.event_id LIKE 'evt_light_%'`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var s float64
		if err := rows.Scan(&s); err != nil {
			b.Fatal(err)
		}
		lat.latencies = append(lat.latencies, time.Duration(s*float64(time.Second)))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	worker.stop(b)

	// (d) the same drain to a route with a body program. Drains take turns
	// (body, raw, raw, body), so that drift in the machine's load during the
	// run falls on both alike; each kind is read as the mean of its two.
	drained := n + light
	drain := func(route, prefix string) (rate, running float64) {
		if _, err := hammer("accept", n, func(i int) error { return acceptTo(route, prefix, i) }); err != nil {
			b.Fatal(err)
		}
		worker := startWorker(b, db.URL, down.URL)
		b.StartTimer()
		drained += n
		waitDrained(b, db.Pool, down, drained)
		b.StopTimer()
		worker.stop(b)
		rate = spanRate(b, db.Pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries
WHERE starts_with(event_id, '`+prefix+`')`)
		return rate, attemptRunning(b, db.Pool, prefix)
	}
	var shapedRate, rawRate, shapedRunning, rawRunning float64
	for i, route := range []string{"shaped", "sink", "sink", "shaped"} {
		rate, running := drain(route, fmt.Sprintf("evt_turn%d_", i))
		if route == "shaped" {
			shapedRate, shapedRunning = shapedRate+rate/2, shapedRunning+running/2
		} else {
			rawRate, rawRunning = rawRate+rate/2, rawRunning+running/2
		}
	}
	if effects := down.effects(); effects != 5*n+light {
		b.Fatalf("downstream saw %d distinct keys, want %d", effects, 5*n+light)
	}

	fmt.Fprintf(os.Stdout, "\nworker, %d workers, %d jobs per drain\n", workerConcurrency(), n)
	fmt.Fprintf(os.Stdout, "%-40s %9.0f jobs/s    a job runs %6.1f ms on average\n", "(a) River, no-op job", riverRate, noopRunning*1000)
	fmt.Fprintf(os.Stdout, "%-40s %9.0f events/s  call to end %6.1f ms on average\n", "(b) hookgate worker, instant downstream", hookgateRate, running*1000)
	fmt.Fprintf(os.Stdout, "%-40s %9.0f events/s  call to end %6.1f ms on average\n", "(d) jq body program, mean of 2 drains", shapedRate, shapedRunning*1000)
	fmt.Fprintf(os.Stdout, "%-40s %9.0f events/s  call to end %6.1f ms on average\n", "(b') raw relay, mean of 2 drains between", rawRate, rawRunning*1000)
	fmt.Fprintf(os.Stdout, "ratio (b)/(a) = %.2f   (target >= 0.5)\n", hookgateRate/riverRate)
	fmt.Fprintf(os.Stdout, "ratio (d)/(b') = %.2f   (target >= 0.8)\n", shapedRate/rawRate)
	fmt.Fprintf(os.Stdout, "%-40s p50 %7.1f ms  p99 %7.1f ms   (target p50 < 100 ms)\n\n",
		lat.name, ms(lat.pct(0.50)), ms(lat.pct(0.99)))
	b.ReportMetric(riverRate, "river_noop_jobs/s")
	b.ReportMetric(hookgateRate, "hookgate_events/s")
	b.ReportMetric(hookgateRate/riverRate, "b/a")
	b.ReportMetric(shapedRate/rawRate, "d/b")
	b.ReportMetric(ms(lat.pct(0.50)), "c2c_p50_ms")
	b.ReportMetric(ms(lat.pct(0.99)), "c2c_p99_ms")
}

// attemptRunning returns how long, on average, the deliveries of events
// whose ids start with prefix took from their call's start to their end's
// commit, in seconds (the attempt history's started_at to the delivery's
// completed_at).
func attemptRunning(b *testing.B, pool *pgxpool.Pool, prefix string) float64 {
	b.Helper()
	var s float64
	if err := pool.QueryRow(context.Background(), `SELECT avg(extract(epoch FROM d.completed_at - a.started_at))
FROM webhook_attempts a JOIN webhook_deliveries d USING (provider, event_id, route)
WHERE starts_with(a.event_id, $1)`, prefix).Scan(&s); err != nil {
		b.Fatal(err)
	}
	return s
}

// waitDrained waits until the downstream has seen want distinct events,
// then until no delivery is processing any more (the last ends commit after
// their calls), and checks that none failed. The first wait is in memory:
// any poll of the database runs beside what is measured and shares its
// Postgres (a count over the deliveries every 10 ms took most of a core of
// it, and even a probe of the processing index wades through the entries
// the drain left dead).
func waitDrained(b *testing.B, pool *pgxpool.Pool, down *sink, want int) {
	b.Helper()
	down.waitFor(b, want)
	// The pgbench baseline's rows stay processing: nothing delivers them.
	waitUntil(b, pool, `SELECT NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'processing' AND provider <> 'pgbench')`)
	var failed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`).Scan(&failed); err != nil {
		b.Fatal(err)
	}
	if failed > 0 {
		b.Fatalf("%d deliveries failed", failed)
	}
}

// waitJobsDone waits until w has run want jobs, in memory, then until
// River has finalized every job of w's kind.
func waitJobsDone(b *testing.B, pool *pgxpool.Pool, w *noopWorker, want int) {
	b.Helper()
	require.EventuallyWithT(b, func(c *assert.CollectT) {
		require.GreaterOrEqual(c, w.runs.Load(), int64(want), "runs")
	}, 10*time.Minute, 5*time.Millisecond, "the no-op jobs have not run after ten minutes")
	waitUntil(b, pool, `SELECT NOT EXISTS (SELECT 1 FROM river_job
WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled') AND kind = '`+noopArgs{}.Kind()+`')`)
}

// waitUntil polls query, which answers one boolean, until it is true.
func waitUntil(b *testing.B, pool *pgxpool.Pool, query string) {
	b.Helper()
	require.EventuallyWithT(b, func(c *assert.CollectT) {
		var done bool
		require.NoError(c, pool.QueryRow(context.Background(), query).Scan(&done))
		require.True(c, done, "done")
	}, 10*time.Minute, 10*time.Millisecond, "not done after ten minutes")
}

// spanRate returns (count-1) / (last - first) for a query returning a
// count and the first and last completion times.
func spanRate(b *testing.B, pool *pgxpool.Pool, query string) float64 {
	b.Helper()
	var n int
	var first, last time.Time
	if err := pool.QueryRow(context.Background(), query).Scan(&n, &first, &last); err != nil {
		b.Fatal(err)
	}
	return float64(n-1) / last.Sub(first).Seconds()
}

// checkoutPayload is a paid checkout, shaped like Stripe's, for both drains.
func checkoutPayload(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"checkout.session.completed","data":{"object":`+
		`{"id":"cs_%s","amount_total":4200,"currency":"eur","metadata":{"order_id":"ord_%s","ship":"true"},`+
		`"shipping_details":{"name":"Ada Lovelace","address":{"line1":"12 St James's Square","city":"London",`+
		`"postal_code":"SW1Y 4JH","country":"GB"}}}}}`, id, id, id)
}

// shipmentBody is the shaped route's body program: a shipping API's request.
const shipmentBody = `{order: .data.object.metadata.order_id, reference: $event.idempotency_key, ` +
	`amount: {value: .data.object.amount_total, currency: (.data.object.currency | ascii_upcase)}, ` +
	`to: {name: .data.object.shipping_details.name, address: (.data.object.shipping_details.address | {line1, city, postal_code, country})}}`

type process struct {
	cmd  *exec.Cmd
	done chan error
	base string // http://addr, for processes started by startBinary
}

// startWorker builds and starts the worker binary against databaseURL with
// one route to downstream, and waits until it is healthy.
func startWorker(b *testing.B, databaseURL, downstream string) *process {
	b.Helper()
	return startWorkerWith(b, databaseURL, fmt.Sprintf(`
  - name: sink
    provider: bench
    events: ["*"]
    url: %s/sink
  - name: shaped
    provider: bench
    events: ["*"]
    url: %s/shaped
    body: '%s'
`, downstream, downstream, shipmentBody))
}

// startWorkerWith builds and starts the worker binary against databaseURL
// with routes (YAML list items of provider bench), and waits until it is
// healthy.
func startWorkerWith(b *testing.B, databaseURL, routes string) *process {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "worker")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/hookgate/hookgate/cmd/worker").CombinedOutput(); err != nil {
		b.Fatalf("building worker: %v\n%s", err, out)
	}
	addr := proctest.FreeAddr(b)
	cfg := fmt.Sprintf(`
worker:
  listen: %q
  concurrency: %d
providers:
  - name: bench
    scheme: standard-webhooks
    secrets_env: [BENCH_SECRET]
routes:`, addr, workerConcurrency()) + routes
	cfgPath := filepath.Join(dir, "hookgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "BENCH_SECRET=whsec_YmVuY2g=", "HOOKGATE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	b.Cleanup(func() { p.stop(b) })
	proctest.WaitHealthy(b, "http://"+addr+"/healthz", p.done)
	return p
}

func (p *process) stop(b *testing.B) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
