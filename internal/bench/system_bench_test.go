package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
)

// pgbenchEventSQL is ingest's writes for a new event with one route, the
// event id given as a SQL expression: the claim statement with its
// delivery (claimSQL), and one River job row. Its jobs go to a queue no
// worker serves. River's insert NOTIFY is left out, which favours pgbench.
func pgbenchEventSQL(id string) string {
	return fmt.Sprintf(`WITH claim AS (
    INSERT INTO webhook_event_claims (provider, event_id, event_type, object_id, status, payload, content_type)
    VALUES ('pgbench', %[1]s, 'invoice.paid', 'in_1', 'processing',
            convert_to('{"id": "evt", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}', 'UTF8'),
            'application/json')
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status)
    SELECT provider, event_id, 'sink', 'processing' FROM claim
)
SELECT count(*) FROM claim;
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, tags, metadata)
VALUES (jsonb_build_object('provider', 'pgbench', 'event_id', %[1]s, 'route', 'sink'),
        'bench.pgbench', 10, 1, 'bench_pgbench', 'available', now(), '{}', '{}');
`, id)
}

// pgbenchScript is the per-event transaction ingest commits for a new
// event with one route, written out for pgbench (pgbenchEventSQL).
var pgbenchScript = "\\set r random(1, 9000000000000000000)\nBEGIN;\n" +
	pgbenchEventSQL("'pg_' || :client_id || '_' || :r") + "COMMIT;\n"

// ceilingEvents and ceilingClients shape the batched-commit ceiling: the
// writes of ceilingEvents events in one transaction, as ingest's group
// commit makes them, from ceilingClients pgbench clients.
const ceilingEvents, ceilingClients = 16, 8

// pgbenchCeilingScript is the batched-commit ceiling: pgbenchEventSQL for
// each of ceilingEvents events, in one transaction. Its rate in events per
// second (transactions × ceilingEvents) is what the same writes reach with
// one commit per 16 events, without HTTP, verification or the batching's
// wait.
var pgbenchCeilingScript = func() string {
	var b strings.Builder
	for i := range ceilingEvents {
		fmt.Fprintf(&b, "\\set r%d random(1, 9000000000000000000)\n", i)
	}
	b.WriteString("BEGIN;\n")
	for i := range ceilingEvents {
		b.WriteString(pgbenchEventSQL(fmt.Sprintf("'pgc_' || :client_id || '_' || :r%d", i)))
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}()

// pgbenchSetCeilingScript writes the same ceilingEvents events a
// transaction as pgbenchCeilingScript, but as ingest's group commit does:
// one claim statement for all of them, fanning out their deliveries, and
// one statement inserting their jobs. It shows the database's room under
// ingest's own form of the writes.
var pgbenchSetCeilingScript = fmt.Sprintf(`\set r random(1, 9000000000000000000)
BEGIN;
WITH claim AS (
    INSERT INTO webhook_event_claims (provider, event_id, event_type, object_id, status, payload, content_type)
    SELECT 'pgbench', 'pgs_' || :client_id || '_' || :r || '_' || g, 'invoice.paid', 'in_1', 'processing',
           convert_to('{"id": "evt", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}', 'UTF8'),
           'application/json'
    FROM generate_series(1, %[1]d) g
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id
), deliveries AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status)
    SELECT provider, event_id, 'sink', 'processing' FROM claim
)
SELECT count(*) FROM claim;
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, tags, metadata)
SELECT jsonb_build_object('provider', 'pgbench', 'event_id', 'pgs_' || :client_id || '_' || :r || '_' || g, 'route', 'sink'),
       'bench.pgbench', 10, 1, 'bench_pgbench', 'available', now(), '{}', '{}'
FROM generate_series(1, %[1]d) g;
COMMIT;
`, ceilingEvents)

// pgbenchDrainScript is the drain's own writes for ceilingEvents events, as
// River and the worker make them, from ceilingClients pgbench clients: one
// transaction marks that many available jobs running (what River's fetch
// writes), the next completes their deliveries with a row of history each,
// their claims and their jobs (what the worker's end writes). It leaves
// out what a delivery reads (River's fetch through its queue index, the
// load, the locks, the roll-up's count) and River's repeated completion.
// Beside pgbenchSetCeilingScript, at the same 16 events a transaction, it
// shows what the database itself gives the two phases: the writes of
// delivering an event against those of accepting it. (The worker ends up
// to 128 jobs a transaction, so its own database work per event can be
// below this script's.)
//
// It drains the jobs the pgbench scripts above queued, which no worker
// serves: their ids run from 1 on the fresh database, and each client
// takes the next ceilingEvents of its own share (ids modulo
// ceilingClients) by id, its cycle counted in :k (from 0). Every row is
// found through its primary key with a LIMIT, and updated through its
// ctid, as the worker's statements do: a generic plan made on the
// template's empty statistics otherwise took River's queue index and read
// every job taken before, or every pgbench delivery, for each cycle, and
// the rate swung by a factor of twenty between runs.
var pgbenchDrainScript = fmt.Sprintf(`\set base 1 + :client_id + %[2]d * %[1]d * :k
\set k :k + 1
BEGIN;
WITH fetched AS (
    UPDATE river_job
    SET state = 'running', attempt = attempt + 1, attempted_at = now(), attempted_by = array_append(attempted_by, 'pgbench')
    WHERE ctid = ANY (ARRAY(
        SELECT x.tid FROM generate_series(0, %[1]d - 1) g
        CROSS JOIN LATERAL (SELECT ctid AS tid, state, queue FROM river_job WHERE id = :base + %[2]d * g LIMIT 1) x
        WHERE x.state = 'available' AND x.queue = 'bench_pgbench'))
    RETURNING id, args
)
SELECT array_agg(id) AS ids, array_agg(args->>'event_id') AS events FROM fetched \gset
COMMIT;
BEGIN;
UPDATE webhook_deliveries
SET status = 'completed', attempt_count = attempt_count + 1, completed_at = now(), updated_at = now()
WHERE ctid = ANY (ARRAY(
    SELECT x.tid FROM unnest(:events::text[]) e
    CROSS JOIN LATERAL (SELECT ctid AS tid FROM webhook_deliveries WHERE provider = 'pgbench' AND event_id = e AND route = 'sink' LIMIT 1) x));
INSERT INTO webhook_attempts (provider, event_id, route, attempt, started_at, duration_ms, status_code)
SELECT 'pgbench', e, 'sink', 1, now(), 1, 200 FROM unnest(:events::text[]) e;
UPDATE webhook_event_claims
SET status = 'completed', completed_at = now(), attempt_count = attempt_count + 1, updated_at = now()
WHERE ctid = ANY (ARRAY(
    SELECT x.tid FROM unnest(:events::text[]) e
    CROSS JOIN LATERAL (SELECT ctid AS tid FROM webhook_event_claims WHERE provider = 'pgbench' AND event_id = e LIMIT 1) x));
UPDATE river_job SET state = 'completed', finalized_at = now()
WHERE ctid = ANY (ARRAY(
    SELECT x.tid FROM unnest(:ids::bigint[]) i
    CROSS JOIN LATERAL (SELECT ctid AS tid FROM river_job WHERE id = i LIMIT 1) x));
COMMIT;
`, ceilingEvents, ceilingClients)

// BenchmarkSystem runs the binaries as an operator would, on one database
// in one run, beside the baselines the targets are stated against:
//
//   - pgbench running ingest's per-event transaction (-c 64 -M prepared);
//   - the batched-commit ceiling: the same writes, 16 events a transaction,
//     8 pgbench clients (pgbenchCeilingScript), and the same again with
//     ingest's set-based statements (pgbenchSetCeilingScript);
//   - the drain's writes at the same 16 events a transaction
//     (pgbenchDrainScript), beside ingest's set-based ones: the database's
//     own ratio between delivering and accepting;
//   - ingest alone (no worker), 64 keep-alive senders, unique Stripe events;
//   - the same with every request a copy of one event;
//   - River draining no-op jobs with the worker's settings, in-process;
//   - the worker draining ingest's backlog against an instant downstream;
//   - 20 events/s through ingest's HTTP with the worker running, from the
//     request sent to the downstream receiving it;
//   - ingest at full rate with the worker running beside it, as a pair
//     runs at peak: what share of the accepted events reached the
//     downstream by the time the last was accepted;
//   - the drain and the pair again with the worker's slots sized for this
//     downstream (BENCH_SIZED_CONCURRENCY, default 400; see
//     sizedConcurrency);
//   - the scaling run: two ingest processes, then two workers;
//   - the black box again on a private cluster with fsync and
//     synchronous_commit on (privateRun), and once more on one whose
//     every flush is slowed to a slower disk's latency (slowFlush).
//
// It profiles ingest's CPU over the unique-events phase and the worker's
// over its drain at the defaults (cpuProfilePath), and counts this
// process's own CPU: the senders' over the unique-events phase, the
// downstream's over the drain.
//
// It reports CPU-seconds per 1,000 events (from /proc: the binaries and the
// Postgres server's processes), peak RSS, and prints the ratios against
// the targets last. Sizes: BENCH_SYSTEM_EVENTS (default 10000) events per
// phase, BENCH_PGBENCH_SECONDS (default 10).
func BenchmarkSystem(b *testing.B) {
	n := envInt("BENCH_SYSTEM_EVENTS", 10000)
	flush := slowFlush(b) // read first: a bad value fails at once, not after the run
	db := dbtest.NewDB(b)
	bins := buildBinaries(b)
	pg := postmaster(b, db.Pool)

	down := newSink(b)
	cfg := writeConfig(b, down.URL, workerConcurrency())
	// The binaries log at the shipped level, info: ingest's line per
	// request and the worker's per attempt are part of what they cost.
	env := []string{"DATABASE_URL=" + db.URL, "BENCH_STRIPE=" + benchSecret}
	profile, workerProfile := cpuProfilePath(b, "ingest"), cpuProfilePath(b, "worker")

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	post := func(url string, s signedEvent) error { return postStripe(client, url, s.body, s.header) }
	events := func(prefix string, k int) []signedEvent {
		s := make([]signedEvent, k)
		for i := range s {
			s[i] = signEvent(fmt.Sprintf("%s_%d", prefix, i))
		}
		return s
	}

	b.ResetTimer()
	steal0, ticks0 := machineTicks(b)
	// pgbench first, on the smallest tables: table growth counts against
	// our path, not for it.
	base := runBaselines(b, db.URL, db.Pool, pg)
	tps, txs, pgbenchPG, ceiling, writes := base.tps, base.txs, base.pgbenchPG, base.ceiling, base.writes

	ingest := startBinary(b, bins, "ingest", cfg, append(env, "HOOKGATE_BENCH_CPUPROFILE="+profile))
	url := ingest.base + "/webhooks/stripe"
	alone := runIngest(b, client, ingest, db.Pool, pg, "evt_warm", events("evt_unique", n), true)
	a, ingestCPU, ingestPG, sendersCPU, ingestWAL := alone.phase, alone.cpu, alone.pg, alone.senders, alone.wal
	top := profileTop(b, profile)
	storm := signEvent("evt_storm")
	st, err := hammer("ingest, one event id storm", n, func(int) error { return post(url, storm) })
	if err != nil {
		b.Fatal(err)
	}

	// River's own drain of no-op jobs, with the worker's settings.
	riverRate := riverNoopDrain(b, db.Pool, n)

	// The worker drains ingest's backlog.
	backlog := 4*concurrency + n + 1
	dr := runDrain(b, bins, cfg, append(env, "HOOKGATE_BENCH_CPUPROFILE="+workerProfile), db.Pool, pg, down, backlog, "provider = 'stripe'", true)
	worker, workerCPU, workerPG, sinkCPU, workerWAL := dr.worker, dr.cpu, dr.pg, dr.downCPU, dr.wal
	workerTop := profileTop(b, workerProfile)
	drain := dr.rate

	// Light load through ingest's HTTP, the worker running; first, the
	// floor under it: one durable commit at the same pace. An event's path
	// holds at least two (its claim, and River's fetch marking its job
	// running) before the downstream sees it.
	const light, perSecond = 200, 20
	floor := commitLatency(b, db.Pool, light, perSecond)
	lightEvents := events("evt_light", light)
	sent := make([]time.Time, light)
	tick := time.NewTicker(time.Second / perSecond)
	for i := range light {
		<-tick.C
		sent[i] = time.Now()
		if err := post(url, lightEvents[i]); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	waitDrained(b, db.Pool, down, backlog+light)
	lat := phase{name: "accept -> downstream, 20 events/s"}
	for i := range light {
		lat.latencies = append(lat.latencies, down.arrived(fmt.Sprintf("evt_light_%d", i)).Sub(sent[i]))
	}
	if distinct := down.events(); distinct != backlog+light {
		b.Fatalf("downstream saw %d distinct events, want %d", distinct, backlog+light)
	}

	// Ingest and the worker at once, as a pair runs at peak: how much of
	// what was accepted had reached the downstream when the last event was
	// accepted, and how long the rest took.
	total := backlog + light
	runPair := func(name, prefix string) pairRun {
		evs := events(prefix, n)
		p, err := hammer(name, n, func(i int) error { return post(url, evs[i]) })
		if err != nil {
			b.Fatal(err)
		}
		r := pairRun{phase: p}
		loadEnd := time.Now()
		total += n
		waitDrained(b, db.Pool, down, total)
		var last time.Time
		for i := range n {
			t := down.arrived(fmt.Sprintf("%s_%d", prefix, i))
			if !t.After(loadEnd) {
				r.kept++
			}
			if t.After(last) {
				last = t
			}
		}
		r.tail = last.Sub(loadEnd)
		return r
	}
	pair := runPair("ingest, the worker running", "evt_pair")
	ingestRSS, workerRSS := peakRSS(ingest.pid()), peakRSS(worker.pid())
	worker.stop(b)

	// The drain and the pair again, the worker's slots sized for this
	// downstream: with an instant one, a slot's cycle is River's fetch,
	// the load and the end, and 100 slots cap the drain there.
	sizedCfg := writeConfig(b, down.URL, sizedConcurrency())
	sizedEvents := events("evt_backlog", n)
	if _, err := hammer("backlog", n, func(i int) error { return post(url, sizedEvents[i]) }); err != nil {
		b.Fatal(err)
	}
	pgS0 := pg.cpu()
	sized := startBinary(b, bins, "worker", sizedCfg, env)
	total += n
	waitDrained(b, db.Pool, down, total)
	sizedCPU, sizedPG := cpuOf(sized.pid()), pg.cpu()-pgS0
	sizedDrain := spanRate(b, db.Pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE event_id LIKE 'evt_backlog_%'`)
	sizedPair := runPair(fmt.Sprintf("the same, %d slots", sizedConcurrency()), "evt_pair_sized")
	sizedRSS := peakRSS(sized.pid())
	sized.stop(b)

	// Scaling: two ingest processes, then two workers, on the same database.
	ingest2 := startBinary(b, bins, "ingest", cfg, env)
	urls := []string{url, ingest2.base + "/webhooks/stripe"}
	if _, err := hammer("warm-up", 4*concurrency, func(i int) error { return post(urls[1], signEvent(fmt.Sprintf("evt_warm2_%d", i))) }); err != nil {
		b.Fatal(err)
	}
	scaled := events("evt_scaled", n)
	a2, err := hammer("ingest x2, unique events", n, func(i int) error { return post(urls[i%2], scaled[i]) })
	if err != nil {
		b.Fatal(err)
	}
	ingest2.stop(b)
	w1, w2 := startBinary(b, bins, "worker", cfg, env), startBinary(b, bins, "worker", cfg, env)
	total += 4*concurrency + n
	waitDrained(b, db.Pool, down, total)
	drain2 := spanRate(b, db.Pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE event_id LIKE 'evt_scaled_%'`)
	w1.stop(b)
	w2.stop(b)
	ingest.stop(b)

	// The same black box on a private cluster with fsync and
	// synchronous_commit on, as an operator deploys: a disk of its own
	// kind, and no other work's backends counted in Postgres' CPU.
	priv := privateRun(b, bins, down, n, "evt_private", 0)
	// And once more on a cluster whose every flush is slowed to the
	// latency of a slower disk, so that both kinds of disk are seen on any
	// machine (BENCH_SLOW_FLUSH, default 4ms; 0 leaves it out).
	var slow privateFigures
	if flush > 0 {
		slow = privateRun(b, bins, down, n, "evt_slowflush", flush)
	}
	b.StopTimer()
	steal1, ticks1 := machineTicks(b)
	steal := 100 * float64(steal1-steal0) / float64(max(ticks1-ticks0, 1))

	per1k := func(sec float64, events int) float64 { return sec / float64(events) * 1000 }
	mib := func(kb int) float64 { return float64(kb) / 1024 }
	out := os.Stdout
	fmt.Fprintf(out, "\nsystem, %d senders, %d events per phase, worker.concurrency %d (sized: %d)\n",
		concurrency, n, workerConcurrency(), sizedConcurrency())
	fmt.Fprintf(out, "%-40s %9.0f tx/s\n", "pgbench, per-event transaction", tps)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", fmt.Sprintf("pgbench, %d events a commit, %d clients", ceilingEvents, ceilingClients), ceiling)
	writes.print(out)
	for _, p := range []phase{a, st, pair.phase, sizedPair.phase, a2} {
		fmt.Fprintln(out, p)
	}
	fmt.Fprintf(out, "%-40s %9.0f jobs/s\n", "River, no-op drain", riverRate)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", "worker drain", drain)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", fmt.Sprintf("worker drain, %d slots", sizedConcurrency()), sizedDrain)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", "worker x2 drain", drain2)
	for _, p := range []struct {
		name string
		r    pairRun
	}{{"the worker, beside ingest", pair}, {fmt.Sprintf("the same, %d slots", sizedConcurrency()), sizedPair}} {
		fmt.Fprintf(out, "%-40s %9.0f events/s while accepting; the rest within %.0f ms\n",
			p.name, float64(p.r.kept)/p.r.elapsed.Seconds(), ms(p.r.tail))
	}
	fmt.Fprintf(out, "%-40s p50 %7.2f ms  p99 %7.2f ms\n", floor.name, ms(floor.pct(0.50)), ms(floor.pct(0.99)))
	fmt.Fprintf(out, "%-40s p50 %7.2f ms  p99 %7.2f ms\n", lat.name, ms(lat.pct(0.50)), ms(lat.pct(0.99)))
	fmt.Fprintf(out, "CPU-s per 1,000 events: ingest %.2f + Postgres %.2f while accepting; worker %.2f + Postgres %.2f while draining"+
		" (%d slots: %.2f + %.2f)\n", per1k(ingestCPU, n), per1k(ingestPG, n), per1k(workerCPU, backlog), per1k(workerPG, backlog),
		sizedConcurrency(), per1k(sizedCPU, n), per1k(sizedPG, n))
	fmt.Fprintf(out, "CPU-s per 1,000 events, pgbench's per-event transaction: Postgres %.2f\n", per1k(pgbenchPG, txs))
	fmt.Fprintf(out, "CPU-s per 1,000 events, this process: the senders %.2f while ingest accepts, the downstream %.2f while the worker drains\n",
		per1k(sendersCPU, n), per1k(sinkCPU, backlog))
	fmt.Fprintf(out, "WAL per event: %.0f B while accepting, %.0f B while draining\n",
		ingestWAL, workerWAL)
	fmt.Fprintf(out, "peak RSS: ingest %.0f MiB, worker %.0f MiB (%d slots: %.0f MiB)\n",
		mib(ingestRSS), mib(workerRSS), sizedConcurrency(), mib(sizedRSS))
	fmt.Fprintf(out, "\ningest's CPU profile over \"ingest, unique events\": %s (go tool pprof -top %s)\n%s", profile, profile, top)
	fmt.Fprintf(out, "\nthe worker's CPU profile over its drain at the defaults: %s (go tool pprof -top %s)\n%s", workerProfile, workerProfile, workerTop)
	priv.print(out)
	if flush > 0 {
		slow.print(out)
	}
	fmt.Fprintf(out, "\nratios, same run (target)\n")
	fmt.Fprintf(out, "  the machine's CPU steal           %4.1f %% of its CPU time over the run (a quiet machine: under 1 %%)\n", steal)
	fmt.Fprintf(out, "  ingest / pgbench transaction     %5.2f  (>= 1.0, aim 1.5)\n", a.rate()/tps)
	fmt.Fprintf(out, "  ingest / %d-a-commit ceiling      %5.2f  (>= 0.8); %.2f of the set-based writes\n", ceilingEvents, a.rate()/ceiling, a.rate()/writes.ingest)
	fmt.Fprintf(out, "  ingest p99 at %d senders         %5.1f ms (<= 50 ms)\n", concurrency, ms(a.pct(0.99)))
	fmt.Fprintf(out, "  storm / new events               %5.2f  (>= 1.5)\n", st.rate()/a.rate())
	fmt.Fprintf(out, "  worker drain / ingest            %5.2f  (>= 0.85); %.2f at %d slots\n",
		drain/a.rate(), sizedDrain/a.rate(), sizedConcurrency())
	fmt.Fprintf(out, "  worker drain / River no-op       %5.2f\n", drain/riverRate)
	fmt.Fprintf(out, "  worker drain / the drain's writes %4.2f; the drain's writes / ingest's %.2f (the database's own ratio)\n",
		drain/writes.drain, writes.drain/writes.ingest)
	fmt.Fprintf(out, "  WAL an event, drain / accept      %4.2f through the binaries, %.2f through pgbench's writes\n",
		workerWAL/ingestWAL, writes.drainWAL/writes.ingestWAL)
	fmt.Fprintf(out, "  beside ingest: delivered/accepted %4.2f  (>= 1.0 keeps pace); %.2f at %d slots\n",
		float64(pair.kept)/float64(n), float64(sizedPair.kept)/float64(n), sizedConcurrency())
	fmt.Fprintf(out, "  accept->downstream p99, 20/s     %5.1f ms (<= 20 ms); %.1f x one commit's p99\n",
		ms(lat.pct(0.99)), float64(lat.pct(0.99))/float64(floor.pct(0.99)))
	fmt.Fprintf(out, "  peak RSS ingest / worker         %3.0f / %3.0f MiB (<= 64 MiB each); worker %.0f MiB at %d slots\n",
		mib(ingestRSS), mib(workerRSS), mib(sizedRSS), sizedConcurrency())
	fmt.Fprintf(out, "  2 ingest / 1 ingest              %5.2f\n", a2.rate()/a.rate())
	fmt.Fprintf(out, "  2 workers / 1 worker             %5.2f\n", drain2/drain)
	fmt.Fprintf(out, "  private cluster: ingest / pgbench %4.2f, ingest / ceiling %.2f, worker drain / ingest %.2f;"+
		" worker drain / the drain's writes %.2f, the drain's writes / ingest's %.2f; WAL an event, drain / accept %.2f\n\n",
		priv.ingest.rate()/priv.tps, priv.ingest.rate()/priv.ceiling, priv.drain/priv.ingest.rate(),
		priv.drain/priv.writes.drain, priv.writes.drain/priv.writes.ingest, priv.workerWAL/priv.ingestWAL)
	if flush > 0 {
		fmt.Fprintf(out, "  slow-flush cluster: ingest / pgbench %4.2f, ingest / ceiling %.2f, worker drain / ingest %.2f;"+
			" worker drain / the drain's writes %.2f, the drain's writes / ingest's %.2f; WAL an event, drain / accept %.2f\n\n",
			slow.ingest.rate()/slow.tps, slow.ingest.rate()/slow.ceiling, slow.drain/slow.ingest.rate(),
			slow.drain/slow.writes.drain, slow.writes.drain/slow.writes.ingest, slow.workerWAL/slow.ingestWAL)
		b.ReportMetric(slow.ingest.rate()/slow.tps, "slowflush_ingest/pgbench")
		b.ReportMetric(slow.ingest.rate()/slow.ceiling, "slowflush_ingest/ceiling")
		b.ReportMetric(slow.drain/slow.ingest.rate(), "slowflush_drain/ingest")
	}
	b.ReportMetric(a.rate()/tps, "ingest/pgbench")
	b.ReportMetric(a.rate()/ceiling, "ingest/ceiling")
	b.ReportMetric(priv.ingest.rate()/priv.ceiling, "private_ingest/ceiling")
	b.ReportMetric(drain/a.rate(), "drain/ingest")
	b.ReportMetric(writes.drain/writes.ingest, "drain_writes/ingest_writes")
	b.ReportMetric(sizedDrain/a.rate(), "sized_drain/ingest")
	b.ReportMetric(float64(pair.kept)/float64(n), "pair_delivered/accepted")
	b.ReportMetric(float64(sizedPair.kept)/float64(n), "sized_pair_delivered/accepted")
	b.ReportMetric(ms(lat.pct(0.99)), "light_p99_ms")
	b.ReportMetric(priv.ingest.rate()/priv.tps, "private_ingest/pgbench")
	b.ReportMetric(priv.drain/priv.ingest.rate(), "private_drain/ingest")
	b.ReportMetric(priv.writes.drain/priv.writes.ingest, "private_drain_writes/ingest_writes")
	b.ReportMetric(priv.workerWAL/priv.ingestWAL, "private_drain_wal/ingest_wal")
	b.ReportMetric(steal, "steal_%")
}

// pairRun is a pair phase: ingest at full rate with the worker beside it;
// kept is how many of its events reached the downstream by the time the
// last was accepted, tail how long the rest took after that.
type pairRun struct {
	phase
	kept int
	tail time.Duration
}

// slowFlush is how much slower the slow-flush cluster makes each of its
// server's flushes, BENCH_SLOW_FLUSH (a Go duration, default 4ms: one
// commit then takes about 5 ms, the latency of a slower disk); 0 leaves
// that cluster out.
func slowFlush(b *testing.B) time.Duration {
	b.Helper()
	d, err := time.ParseDuration(cmp.Or(os.Getenv("BENCH_SLOW_FLUSH"), "4ms"))
	if err != nil || d < 0 {
		b.Fatalf("BENCH_SLOW_FLUSH must be a duration such as 4ms, or 0 to leave the slow-flush cluster out; got %q",
			os.Getenv("BENCH_SLOW_FLUSH"))
	}
	return d
}

// sizedConcurrency is the worker.concurrency of the system benchmark's
// sized phases, BENCH_SIZED_CONCURRENCY (default 400). A route's River
// queue has four slots per unit of it (deliver.Queues), so 400 is 1,600
// slots; the default's 100 already has the 400 slots this phase was
// written to measure before slots and call tokens were decoupled.
func sizedConcurrency() int { return envInt("BENCH_SIZED_CONCURRENCY", 400) }

type signedEvent struct {
	body   []byte
	header string
}

func signEvent(id string) signedEvent {
	body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_%s"}}}`, id, id)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
	return signedEvent{body: body, header: sp.Header}
}

// commitLatency times k one-row durable commits at perSecond.
func commitLatency(b *testing.B, pool *pgxpool.Pool, k, perSecond int) phase {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_commit (n int)`); err != nil {
		b.Fatal(err)
	}
	p := phase{name: "(floor) one commit, 20/s"}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for i := range k {
		<-tick.C
		t0 := time.Now()
		if _, err := pool.Exec(ctx, `INSERT INTO bench_commit VALUES ($1)`, i); err != nil {
			b.Fatal(err)
		}
		p.latencies = append(p.latencies, time.Since(t0))
	}
	return p
}

// runPgbench runs pgbenchScript against databaseURL and returns its rate
// and how many transactions it ran.
func runPgbench(b *testing.B, databaseURL string) (float64, int) {
	b.Helper()
	return runPgbenchScript(b, databaseURL, pgbenchScript, concurrency)
}

// runPgbenchCeiling runs pgbenchCeilingScript against databaseURL and
// returns its rate in events per second.
func runPgbenchCeiling(b *testing.B, databaseURL string) float64 {
	b.Helper()
	tps, _ := runPgbenchScript(b, databaseURL, pgbenchCeilingScript, ceilingClients)
	return tps * ceilingEvents
}

// pgbenchWrites are the two phases' writes alone, set-based, ceilingEvents
// events at a time from ceilingClients clients: ingest's
// (pgbenchSetCeilingScript) and the drain's (pgbenchDrainScript), in
// events per second, with Postgres' CPU-seconds per 1,000 events and the
// WAL bytes each event wrote.
type pgbenchWrites struct {
	ingest, drain       float64
	ingestPG, drainPG   float64
	ingestWAL, drainWAL float64
}

// runPgbenchWrites runs pgbenchSetCeilingScript, then pgbenchDrainScript on
// the jobs the pgbench scripts queued.
func runPgbenchWrites(b *testing.B, databaseURL string, pool *pgxpool.Pool, pg server) pgbenchWrites {
	b.Helper()
	var w pgbenchWrites
	pg0, wal0 := pg.cpu(), walBytes(b, pool)
	tps, txs := runPgbenchScript(b, databaseURL, pgbenchSetCeilingScript, ceilingClients)
	w.ingest, w.ingestPG = tps*ceilingEvents, (pg.cpu()-pg0)/float64(txs*ceilingEvents)*1000
	w.ingestWAL = float64(walBytes(b, pool)-wal0) / float64(txs*ceilingEvents)
	pg0, wal0 = pg.cpu(), walBytes(b, pool)
	var cycles int
	w.drain, cycles = runPgbenchDrain(b, databaseURL, pool)
	w.drainPG = (pg.cpu() - pg0) / float64(cycles*ceilingEvents) * 1000
	w.drainWAL = float64(walBytes(b, pool)-wal0) / float64(cycles*ceilingEvents)
	return w
}

func (w pgbenchWrites) print(out io.Writer) {
	fmt.Fprintf(out, "%-40s %9.0f events/s (Postgres %.2f CPU-s per 1,000; WAL %.0f B an event)\n",
		"the same, set-based, as ingest writes", w.ingest, w.ingestPG, w.ingestWAL)
	fmt.Fprintf(out, "%-40s %9.0f events/s (Postgres %.2f CPU-s per 1,000; WAL %.0f B an event)\n",
		"pgbench, the drain's writes", w.drain, w.drainPG, w.drainWAL)
}

// runPgbenchDrain runs pgbenchDrainScript against databaseURL and returns
// its rate in events per second. It fails unless every cycle drained
// ceilingEvents jobs: the queued jobs ran out, or their ids have gaps.
func runPgbenchDrain(b *testing.B, databaseURL string, pool *pgxpool.Pool) (float64, int) {
	b.Helper()
	count := func() int {
		var n int
		if err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM river_job WHERE queue = 'bench_pgbench' AND state = 'completed'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	before := count()
	tps, txs := runPgbenchScript(b, databaseURL, pgbenchDrainScript, ceilingClients, "-D", "k=0")
	if drained := count() - before; drained != txs*ceilingEvents {
		b.Fatalf("pgbench drained %d jobs in %d cycles, want %d: the queued jobs ran out, or their ids have gaps", drained, txs, txs*ceilingEvents)
	}
	return tps * ceilingEvents, txs
}

// runPgbenchScript runs script from clients pgbench clients against
// databaseURL for BENCH_PGBENCH_SECONDS, with pgbench's further args, and
// returns its rate and how many transactions it ran.
func runPgbenchScript(b *testing.B, databaseURL, sql string, clients int, args ...string) (float64, int) {
	b.Helper()
	script := filepath.Join(b.TempDir(), "claim.sql")
	if err := os.WriteFile(script, []byte(sql), 0o600); err != nil {
		b.Fatal(err)
	}
	secs := envInt("BENCH_PGBENCH_SECONDS", 10)
	out, err := exec.Command("pgbench", append(append([]string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(secs), "-f", script}, args...), databaseURL)...).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench printed no rate:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	done := regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`).FindSubmatch(out)
	if done == nil {
		b.Fatalf("pgbench printed no transaction count:\n%s", out)
	}
	txs, _ := strconv.Atoi(string(done[1]))
	return tps, txs
}

// riverNoopDrain inserts n no-op jobs on a queue of their own and returns
// the rate at which a River client with the worker's settings completes them.
func riverNoopDrain(b *testing.B, pool *pgxpool.Pool, n int) float64 {
	b.Helper()
	ctx := context.Background()
	const queue = "bench_noop"
	workers := river.NewWorkers()
	noop := &noopWorker{}
	river.AddWorker(workers, noop)
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: workerConcurrency()}},
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: fetchPollInterval,
		Logger:            discardLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{N: i}, InsertOpts: &river.InsertOpts{Queue: queue}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	waitJobsDone(b, pool, noop, n)
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	return spanRate(b, pool, `SELECT count(*), min(finalized_at), max(finalized_at) FROM river_job WHERE queue = 'bench_noop'`)
}

type binaries struct{ dir string }

func buildBinaries(b *testing.B) binaries {
	b.Helper()
	dir := b.TempDir()
	// benchprofile: ingest writes a CPU profile on signal (cmd/ingest).
	if out, err := exec.Command("go", "build", "-tags", "benchprofile", "-o", dir+"/", "github.com/hookgate/hookgate/cmd/ingest",
		"github.com/hookgate/hookgate/cmd/worker").CombinedOutput(); err != nil {
		b.Fatalf("building the binaries: %v\n%s", err, out)
	}
	return binaries{dir: dir}
}

func writeConfig(b *testing.B, downstream string, slots int) string {
	b.Helper()
	cfg := fmt.Sprintf(`
worker:
  concurrency: %d
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [BENCH_STRIPE]
routes:
  - name: sink
    provider: stripe
    events: ["invoice.*"]
    url: %s/sink
`, slots, downstream)
	path := filepath.Join(b.TempDir(), "hookgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// startBinary starts ingest or worker with cfg on a free address and waits
// until it is healthy; base is its HTTP address.
func startBinary(b *testing.B, bins binaries, name, cfg string, env []string) *process {
	b.Helper()
	addr := proctest.FreeAddr(b)
	cmd := exec.Command(filepath.Join(bins.dir, name), "--config", cfg, "--listen", addr)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1), base: "http://" + addr}
	go func() { p.done <- cmd.Wait() }()
	b.Cleanup(func() { p.stop(b) })
	proctest.WaitHealthy(b, p.base+"/healthz", p.done)
	return p
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// server is the Postgres server the benchmark's database lives on, seen
// through /proc: it must run on this machine.
type server struct{ pid int }

func postmaster(b *testing.B, pool *pgxpool.Pool) server {
	b.Helper()
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	if err != nil {
		b.Fatalf("the Postgres server must run on this machine to count its CPU: %v", err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return server{pid: ppid}
}

// cpu returns the CPU-seconds used so far by the server's processes: the
// postmaster, its children alive now, and those it has reaped (its cutime
// and cstime), so that a backend that exited between two readings, as
// pgbench's do, is counted too.
func (s server) cpu() float64 {
	total := cpuOf(s.pid) + reapedCPUOf(s.pid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := strconv.Itoa(s.pid)
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) > 1 && f[1] == parent {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			total += cpuOf(pid)
		}
	}
	return total
}

// walBytes returns the server's WAL insert position in bytes: the
// difference of two readings is the WAL written between them by every
// session of the server (exact, unlike pg_stat_wal, which backends report
// up to a second late). On the shared server it counts other work's WAL
// too; a private cluster's is the phase's own, with its autovacuum.
func walBytes(b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(),
		`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// machineTicks reads the machine's CPU time from /proc/stat: the steal
// (time the hypervisor gave this machine's CPUs to others) and the total,
// in clock ticks. A run whose steal is more than a few percent of its
// total shared its cores with another machine's work, and its rates and
// latencies with it; the WAL an event writes hardly depends on that.
// It fails the benchmark if /proc/stat cannot be read, rather than report
// a steal of zero.
func machineTicks(b *testing.B) (steal, total uint64) {
	b.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	// cpu user nice system idle iowait irq softirq steal guest guest_nice:
	// the first eight times add up to the total (guest time is already
	// counted in user).
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: field %d of %q: %v", i+1, line, err)
		}
		total += n
		if i == 7 {
			steal = n
		}
	}
	return steal, total
}
