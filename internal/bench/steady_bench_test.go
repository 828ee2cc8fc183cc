package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"
)

// BenchmarkSteadyLoad sends events one at a time at a steady rate, as most
// installations receive them, rather than from 64 senders at once: each
// request is then a group commit of one event and each delivery a batch
// of one, and what a request costs is what every statement costs on its
// own, its planning included. On a private cluster of the benchmark's own
// (fsync, synchronous_commit and full_page_writes on) with both binaries
// at the shipped defaults, for each rate (20 and 100 events/s, 15 seconds'
// worth of events each; BENCH_STEADY_SECONDS) it prints where an event's
// time goes (the request until ingest answers; from the answer to the
// start of its call, by its attempt's started_at, which holds River's
// fetch and the load; from there to the downstream), the whole path, and
// the CPU-milliseconds each event cost ingest, the worker and Postgres.
// Postgres' CPU per second with both binaries running and no event,
// measured first, is printed beside it.
func BenchmarkSteadyLoad(b *testing.B) {
	ctx := context.Background()
	secs := envInt("BENCH_STEADY_SECONDS", 15)
	bins := buildBinaries(b)
	down := newSink(b)
	cfg := writeConfig(b, down.URL, workerConcurrency())
	dbURL, pool, label, stop := privateCluster(b, bins, cfg, 0)
	defer stop()
	env := []string{"DATABASE_URL=" + dbURL, "BENCH_STRIPE=" + benchSecret}
	ingest := startBinary(b, bins, "ingest", cfg, env)
	worker := startBinary(b, bins, "worker", cfg, env)
	pg := postmaster(b, pool)
	client := &http.Client{}
	url := ingest.base + "/webhooks/stripe"

	b.ResetTimer()
	// Idle: a few seconds to settle after start-up, then the same again
	// measured.
	const idle = 5 * time.Second
	time.Sleep(idle)
	pgIdle0 := pg.cpu()
	time.Sleep(idle)
	pgIdle := (pg.cpu() - pgIdle0) / idle.Seconds()

	out := os.Stdout
	fmt.Fprintf(out, "\nsteady load, one sender, private cluster (%s), worker.concurrency %d\n", label, workerConcurrency())
	fmt.Fprintf(out, "Postgres idle, both binaries running: %.4f CPU-s per second\n", pgIdle)
	for _, rate := range []int{20, 100} {
		n := rate * secs
		prefix := fmt.Sprintf("evt_steady%d", rate)
		evs := make([]signedEvent, n)
		for i := range evs {
			evs[i] = signEvent(fmt.Sprintf("%s_%d", prefix, i))
		}
		sent, acked := make([]time.Time, n), make([]time.Time, n)
		before := down.events()
		i0, w0, p0 := cpuOf(ingest.pid()), cpuOf(worker.pid()), pg.cpu()
		start := time.Now()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for i := range evs {
			<-tick.C
			sent[i] = time.Now()
			if err := postStripe(client, url, evs[i].body, evs[i].header); err != nil {
				b.Fatal(err)
			}
			acked[i] = time.Now()
		}
		tick.Stop()
		sending := time.Since(start)
		down.waitFor(b, before+n)
		iCPU, wCPU, pCPU := cpuOf(ingest.pid())-i0, cpuOf(worker.pid())-w0, pg.cpu()-p0

		started := map[string]time.Time{}
		// The call's start, from the attempt history: the end deletes the
		// job's row, and River's attempted_at with it.
		rows, err := pool.Query(ctx, `SELECT event_id, started_at FROM webhook_attempts
WHERE provider = 'stripe' AND event_id LIKE $1`, prefix+"\\_%")
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				b.Fatal(err)
			}
			started[id] = at
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		phases := []phase{{name: "request, until answered"}, {name: "answered -> call started"},
			{name: "call started -> downstream"}, {name: "accept -> downstream"}}
		for i := range evs {
			id := fmt.Sprintf("%s_%d", prefix, i)
			at, ok := started[id]
			if !ok {
				b.Fatalf("no attempt of %s was recorded", id)
			}
			arrived := down.arrived(id)
			for k, d := range []time.Duration{acked[i].Sub(sent[i]), at.Sub(acked[i]), arrived.Sub(at), arrived.Sub(sent[i])} {
				phases[k].latencies = append(phases[k].latencies, d)
			}
		}
		per := func(sec float64) float64 { return sec / float64(n) * 1000 }
		fmt.Fprintf(out, "%d events/s asked, %.1f sent (%d events)\n", rate, float64(n)/sending.Seconds(), n)
		for _, p := range phases {
			fmt.Fprintf(out, "  %-34s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms\n", p.name, ms(p.pct(0.50)), ms(p.pct(0.90)), ms(p.pct(0.99)))
		}
		fmt.Fprintf(out, "  CPU-ms per event: ingest %.2f, worker %.2f, Postgres %.2f (of which idle %.2f)\n",
			per(iCPU), per(wCPU), per(pCPU), per(pgIdle*sending.Seconds()))
		b.ReportMetric(ms(phases[3].pct(0.99)), fmt.Sprintf("p99_ms_at_%d/s", rate))
		b.ReportMetric(per(pCPU), fmt.Sprintf("postgres_cpu_ms/event_at_%d/s", rate))
	}
	worker.stop(b)
	ingest.stop(b)
}
