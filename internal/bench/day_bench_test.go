package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pairShare is the share of ingest-alone's rate at which the day
// benchmark's pair phase sends: production's load, not its peak.
const pairShare = 0.3

// BenchmarkDay measures what a day of traffic costs the phases
// BenchmarkSystem measures on fresh tables. On two private clusters of its
// own (fsync, synchronous_commit and full_page_writes on; autovacuum on,
// as configured by the migrations), one empty and one holding a day of
// rows, with both binaries at the shipped defaults, it runs in turns
// (empty, a day old, a day old, empty, so that drift in the machine's load
// falls on both alike):
//
//   - ingest alone, the worker stopped: 64 keep-alive senders, unique
//     Stripe-signed events (BENCH_DAY_EVENTS, default 5000);
//   - the worker draining that backlog against an instant downstream;
//   - the pair: both binaries running, events sent open loop at 30 % of
//     ingest-alone's rate in the first empty turn (the same rate in every
//     turn) for BENCH_DAY_PAIR_SECONDS (default 20), each timed from
//     ingest's 200 to the downstream receiving it; every event must be
//     delivered.
//
// pgbench's per-event transaction and the two phases' writes run first on
// the day-old cluster's empty tables, before its day, and their rows are
// deleted.
//
// The day (BENCH_DAY=<events/s>x<duration>, default 5x24h) is written
// set-based (seedDay): each event's completed claim with its raw body,
// its delivery and its attempt history row, spread over the day, and the
// River job rows the day's deliveries left (BENCH_DAY_JOBS: none, as the
// worker leaves them now; 24h as River's default retention kept them).
// After the turns, four backlogs are drained one after another on the
// day-old database, the fourth's rate against the first's, and the two ways of
// ending a job (River's completion and its cleaner's delete, or the
// worker's delete) are measured on it (jobEndLever).
//
// It prints the ratios last, with the machine's CPU steal and load over
// the run, and the WAL each event wrote end to end (accept and deliver)
// beside pgbench's per-event transaction's. BENCH_DAY_STORAGE=off resets
// the storage parameters of migration 00020 first, to measure what they
// give; BENCH_DAY_SETTINGS gives the clusters' servers further settings
// (name=value, separated by spaces: "shared_buffers=1GB
// autovacuum_naptime=5s"); BENCH_DAY_STATEMENTS=on prints each drain's
// statements from pg_stat_statements.
func BenchmarkDay(b *testing.B) {
	day, jobsKept := dayFromEnv(b), dayJobRetention(b)
	bins := buildBinaries(b)
	down := newSink(b)
	cfg := writeConfig(b, down.URL, workerConcurrency())
	fresh, label := newDayRun(b, bins, cfg, down)
	aged, _ := newDayRun(b, bins, cfg, down)

	b.ResetTimer()
	load0 := loadAverage(b)
	steal0, ticks0 := machineTicks(b)
	// pgbench first, on the aged cluster's smallest tables, before its
	// day; its rows are then removed (their dead entries stay in its
	// indexes, against the aged database).
	pgb := aged.pgbench(b)
	out := os.Stdout
	seeding := seedDay(b, aged.pool, day, jobsKept)
	fmt.Fprintf(out, "\nday of rows: %s, seeded in %s; River's job rows of the last %s kept\n", day, seeding.Round(time.Second), jobsKept)
	tableSizes(b, out, aged.pool, "after the day was seeded")
	// In turns, empty, aged, aged, empty, so that drift in the machine's
	// load falls on both alike; each database's figures are its two
	// turns' together. Every pair is offered the first empty turn's 30 %.
	e1 := fresh.phases(b, "evt_empty1", 0)
	a1 := aged.phases(b, "evt_aged1", e1.pairAsked)
	a2 := aged.phases(b, "evt_aged2", e1.pairAsked)
	e2 := fresh.phases(b, "evt_empty2", e1.pairAsked)
	backlogs := aged.backlogs(b, "evt_backlog")
	complete, deleted := jobEndLever(b, aged.pool, 20000)
	tableSizes(b, out, aged.pool, "at the end")
	b.StopTimer()
	steal1, ticks1 := machineTicks(b)
	steal := 100 * float64(steal1-steal0) / float64(max(ticks1-ticks0, 1))
	load1 := loadAverage(b)

	fmt.Fprintf(out, "\nday benchmark, two private clusters (%s), storage parameters %s, worker.concurrency %d, %d events a phase\n",
		label, map[bool]string{true: "of migration 00020", false: "Postgres' defaults"}[dayStorage(b)], workerConcurrency(), aged.n)
	pgb.print(out)
	for _, f := range []struct {
		name string
		f    dayFigures
	}{{"empty, turn 1", e1}, {"a day old, turn 1", a1}, {"a day old, turn 2", a2}, {"empty, turn 2", e2}} {
		f.f.print(out, f.name)
		if aged.statements {
			fmt.Fprintf(out, "  the drain's statements, by execution time an event drained:\n%s", f.f.profile)
		}
	}
	fmt.Fprintf(out, "%-40s", "four backlogs, one after another")
	for _, rate := range backlogs {
		fmt.Fprintf(out, " %7.0f", rate)
	}
	fmt.Fprintf(out, " events/s\n")
	for _, e := range []struct {
		name string
		e    jobEnd
	}{{"a job's end: completed, cleaned, vacuumed", complete}, {"a job's end: deleted, vacuumed", deleted}} {
		fmt.Fprintf(out, "%-40s WAL %5.0f B a job, %s for 20,000\n", e.name, e.e.wal, e.e.elapsed.Round(time.Millisecond))
	}

	empty, old := e1.join(e2), a1.join(a2)
	dayRatios{empty: empty, aged: old, backlogs: backlogs, pgbenchWAL: pgb.wal, complete: complete, deleted: deleted,
		steal: steal, load0: load0, load1: load1}.print(out)
	b.ReportMetric(old.ingest.rate()/empty.ingest.rate(), "aged_ingest/empty")
	b.ReportMetric(old.drain/empty.drain, "aged_drain/empty")
	b.ReportMetric(old.drain/old.ingest.rate(), "aged_drain/ingest")
	b.ReportMetric(ms(old.pair.pct(0.99)), "aged_pair_p99_ms")
	b.ReportMetric(backlogs[3]/backlogs[0], "backlog4/backlog1")
	b.ReportMetric(old.wal(), "aged_wal_B/event")
	b.ReportMetric(steal, "steal_%")
}

// newDayRun starts one of BenchmarkDay's private clusters, with the
// server settings of BENCH_DAY_SETTINGS (and pg_stat_statements with
// BENCH_DAY_STATEMENTS=on), migration 00020's storage parameters reset
// with BENCH_DAY_STORAGE=off, and returns it with its settings' label.
func newDayRun(b *testing.B, bins binaries, cfg string, down *sink) (dayRun, string) {
	b.Helper()
	ctx := context.Background()
	settings := strings.Fields(os.Getenv("BENCH_DAY_SETTINGS"))
	statements := os.Getenv("BENCH_DAY_STATEMENTS") == "on"
	if statements {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements")
	}
	dbURL, pool, label, stop := privateClusterWith(b, bins, cfg, 0, settings...)
	b.Cleanup(stop)
	if !dayStorage(b) {
		if _, err := pool.Exec(ctx, resetStorageSQL); err != nil {
			b.Fatal(err)
		}
	}
	if statements {
		if _, err := pool.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
	}
	return dayRun{bins: bins, cfg: cfg, url: dbURL, env: []string{"DATABASE_URL=" + dbURL, "BENCH_STRIPE=" + benchSecret},
		pool: pool, pg: postmaster(b, pool), down: down, n: envInt("BENCH_DAY_EVENTS", 5000), statements: statements}, label
}

// dayPgbench is pgbench's per-event transaction and the two phases'
// writes, run on a day benchmark's cluster.
type dayPgbench struct {
	tps, wal float64 // the per-event transaction's rate and WAL bytes
	writes   pgbenchWrites
}

func (p dayPgbench) print(out io.Writer) {
	fmt.Fprintf(out, "%-40s %9.0f tx/s, WAL %.0f B a transaction\n", "pgbench, per-event transaction", p.tps, p.wal)
	p.writes.print(out)
}

// pgbench runs pgbench's per-event transaction and the two phases' writes
// on r's tables, then deletes their rows and vacuums.
func (r dayRun) pgbench(b *testing.B) dayPgbench {
	b.Helper()
	var p dayPgbench
	wal0 := walBytes(b, r.pool)
	tps, txs := runPgbench(b, r.url)
	p.tps, p.wal = tps, float64(walBytes(b, r.pool)-wal0)/float64(txs)
	p.writes = runPgbenchWrites(b, r.url, r.pool, r.pg)
	for _, q := range []string{`DELETE FROM river_job WHERE queue = 'bench_pgbench'`,
		`DELETE FROM webhook_event_claims WHERE provider = 'pgbench'`,
		`VACUUM ANALYZE webhook_event_claims, webhook_deliveries, webhook_attempts, river_job`} {
		if _, err := r.pool.Exec(context.Background(), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	return p
}

// dayRatios are what BenchmarkDay prints last.
type dayRatios struct {
	empty, aged       dayFigures
	backlogs          []float64
	pgbenchWAL        float64
	complete, deleted jobEnd
	steal             float64
	load0, load1      string
}

func (d dayRatios) print(out io.Writer) {
	empty, aged, backlogs, pgbenchWAL, complete, deleted := d.empty, d.aged, d.backlogs, d.pgbenchWAL, d.complete, d.deleted
	steal, load0, load1 := d.steal, d.load0, d.load1
	fmt.Fprintf(out, "\nratios, same run (target)\n")
	fmt.Fprintf(out, "  the machine's CPU steal            %4.1f %% of its CPU time over the run; load average %s at the start, %s at the end\n",
		steal, load0, load1)
	fmt.Fprintf(out, "  ingest, a day old / empty         %5.2f  (>= 0.9)\n", aged.ingest.rate()/empty.ingest.rate())
	fmt.Fprintf(out, "  drain, a day old / empty          %5.2f  (>= 0.9)\n", aged.drain/empty.drain)
	fmt.Fprintf(out, "  drain / ingest: empty, a day old  %5.2f / %.2f  (>= 0.85)\n",
		empty.drain/empty.ingest.rate(), aged.drain/aged.ingest.rate())
	fmt.Fprintf(out, "  pair p99, 200 -> downstream        %5.1f / %.1f ms, empty / a day old (<= 100 ms)\n",
		ms(empty.pair.pct(0.99)), ms(aged.pair.pct(0.99)))
	fmt.Fprintf(out, "  4th backlog / 1st                 %5.2f  (>= 0.9)\n", backlogs[3]/backlogs[0])
	fmt.Fprintf(out, "  WAL an event, accept + deliver    %5.0f / %.0f B, empty / a day old; %.2f / %.2f x pgbench's per-event transaction\n",
		empty.wal(), aged.wal(), empty.wal()/pgbenchWAL, aged.wal()/pgbenchWAL)
	fmt.Fprintf(out, "  a job's end, WAL deleted / completed %4.2f; time %.2f\n\n",
		deleted.wal/complete.wal, deleted.elapsed.Seconds()/complete.elapsed.Seconds())
}

// dayRun is what BenchmarkDay's phases share.
type dayRun struct {
	bins binaries
	cfg  string
	url  string // the database's
	env  []string
	pool *pgxpool.Pool
	pg   server
	down *sink
	n    int
	// statements profiles each drain with pg_stat_statements
	// (BENCH_DAY_STATEMENTS=on).
	statements bool
}

// dayFigures are one turn of BenchmarkDay's phases.
type dayFigures struct {
	ingest              phase
	drain               float64 // events/s
	pair                phase   // latencies from ingest's 200 to the downstream
	pairAsked           float64 // events/s the pair was sent at
	late                int     // pair events sent late: every slot in flight
	ingestWAL, drainWAL float64 // bytes an event
	ingestPG, drainPG   float64 // Postgres CPU-s per 1,000 events
	profile             string  // the drain's statements (r.statements)
}

// join is f and g, two turns of the same phases, taken together: the
// rates over both, the latencies of both, the per-event figures' means.
func (f dayFigures) join(g dayFigures) dayFigures {
	mean := func(x, y float64) float64 { return (x + y) / 2 }
	return dayFigures{
		ingest: f.ingest.join(g.ingest), drain: mean(f.drain, g.drain), pair: f.pair.join(g.pair),
		pairAsked: f.pairAsked, late: f.late + g.late,
		ingestWAL: mean(f.ingestWAL, g.ingestWAL), drainWAL: mean(f.drainWAL, g.drainWAL),
		ingestPG: mean(f.ingestPG, g.ingestPG), drainPG: mean(f.drainPG, g.drainPG),
	}
}

// wal is the WAL an event wrote end to end: accepted and delivered.
func (f dayFigures) wal() float64 { return f.ingestWAL + f.drainWAL }

func (f dayFigures) print(out io.Writer, name string) {
	fmt.Fprintf(out, "%s:\n", name)
	fmt.Fprintf(out, "  %s\n", f.ingest)
	fmt.Fprintf(out, "  %-38s %9.0f events/s\n", "worker drain", f.drain)
	fmt.Fprintf(out, "  %-38s %9.0f events/s asked, %.0f sent (%d late)  p50 %7.2f ms  p99 %7.2f ms\n",
		"pair, open loop, 200 -> downstream", f.pairAsked, f.pair.rate(), f.late, ms(f.pair.pct(0.50)), ms(f.pair.pct(0.99)))
	fmt.Fprintf(out, "  WAL per event: %.0f B accepting, %.0f B draining; Postgres CPU-s per 1,000 events: %.2f accepting, %.2f draining\n",
		f.ingestWAL, f.drainWAL, f.ingestPG, f.drainPG)
}

// phases runs ingest alone, the drain and the pair, with events whose ids
// start with prefix, after a warm-up drained and a checkpoint. The pair
// sends at pairRate events a second, or at pairShare of this ingest
// alone's rate when pairRate is 0: the day-old database's pair is offered
// the empty one's load, so that the two are timed under the same load.
func (r dayRun) phases(b *testing.B, prefix string, pairRate float64) dayFigures {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * concurrency, MaxConnsPerHost: 4 * concurrency}}
	ingest := startBinary(b, r.bins, "ingest", r.cfg, r.env)
	defer ingest.stop(b)
	url := ingest.base + "/webhooks/stripe"
	send := func(s signedEvent) error { return postStripe(client, url, s.body, s.header) }
	events := func(p string, k int) []signedEvent {
		s := make([]signedEvent, k)
		for i := range s {
			s[i] = signEvent(fmt.Sprintf("%s_%d", p, i))
		}
		return s
	}
	warm := events(prefix+"_warm", 4*concurrency)
	before := r.down.events()
	if _, err := hammer("warm-up", len(warm), func(i int) error { return send(warm[i]) }); err != nil {
		b.Fatal(err)
	}
	worker := startBinary(b, r.bins, "worker", r.cfg, r.env)
	waitDrained(b, r.pool, r.down, before+len(warm))
	worker.stop(b)
	if _, err := r.pool.Exec(context.Background(), `CHECKPOINT`); err != nil {
		b.Fatal(err)
	}

	var f dayFigures
	unique := events(prefix, r.n)
	before = r.down.events()
	wal0, pg0 := walBytes(b, r.pool), r.pg.cpu()
	var err error
	if f.ingest, err = hammer("ingest alone, unique events", r.n, func(i int) error { return send(unique[i]) }); err != nil {
		b.Fatal(err)
	}
	wal1, pg1 := walBytes(b, r.pool), r.pg.cpu()
	if r.statements {
		if _, err := r.pool.Exec(context.Background(), `SELECT pg_stat_statements_reset()`); err != nil {
			b.Fatal(err)
		}
	}
	worker = startBinary(b, r.bins, "worker", r.cfg, r.env)
	defer worker.stop(b)
	waitDrained(b, r.pool, r.down, before+r.n)
	wal2, pg2 := walBytes(b, r.pool), r.pg.cpu()
	f.ingestWAL, f.drainWAL = float64(wal1-wal0)/float64(r.n), float64(wal2-wal1)/float64(r.n)
	f.ingestPG, f.drainPG = (pg1-pg0)/float64(r.n)*1000, (pg2-pg1)/float64(r.n)*1000
	f.drain = spanRate(b, r.pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries
WHERE starts_with(event_id, '`+prefix+`_') AND NOT starts_with(event_id, '`+prefix+`_warm')`)
	if r.statements {
		f.profile = statementProfile(b, r.pool, r.n)
	}

	f.pairAsked = cmp.Or(pairRate, pairShare*f.ingest.rate())
	pairEvents := events(prefix+"_pair", int(f.pairAsked*float64(envInt("BENCH_DAY_PAIR_SECONDS", 20))))
	before = r.down.events()
	acked, late, elapsed, err := openLoop(pairEvents, f.pairAsked, send)
	if err != nil {
		b.Fatal(err)
	}
	waitDrained(b, r.pool, r.down, before+len(pairEvents))
	f.pair, f.late = phase{name: "pair", n: len(pairEvents), elapsed: elapsed}, late
	for i := range pairEvents {
		f.pair.latencies = append(f.pair.latencies, max(0, r.down.arrived(fmt.Sprintf("%s_pair_%d", prefix, i)).Sub(acked[i])))
	}
	return f
}

// backlogs drains four backlogs one after another, each of r.n events
// accepted with the worker stopped, and returns their drain rates.
func (r dayRun) backlogs(b *testing.B, prefix string) []float64 {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	ingest := startBinary(b, r.bins, "ingest", r.cfg, r.env)
	defer ingest.stop(b)
	url := ingest.base + "/webhooks/stripe"
	var rates []float64
	for k := range 4 {
		evs := make([]signedEvent, r.n)
		for i := range evs {
			evs[i] = signEvent(fmt.Sprintf("%s%d_%d", prefix, k, i))
		}
		before := r.down.events()
		if _, err := hammer("backlog", r.n, func(i int) error { return postStripe(client, url, evs[i].body, evs[i].header) }); err != nil {
			b.Fatal(err)
		}
		worker := startBinary(b, r.bins, "worker", r.cfg, r.env)
		waitDrained(b, r.pool, r.down, before+r.n)
		worker.stop(b)
		rates = append(rates, spanRate(b, r.pool, fmt.Sprintf(`SELECT count(*), min(completed_at), max(completed_at)
FROM webhook_deliveries WHERE starts_with(event_id, '%s%d_')`, prefix, k)))
	}
	return rates
}

// openLoop sends evs at rate events a second, each at its own time
// whatever became of the ones before it (an open loop, as providers
// send), and returns when each was answered, how many went out late
// because 4×concurrency requests were already in flight, and how long
// sending took.
func openLoop(evs []signedEvent, rate float64, send func(signedEvent) error) (acked []time.Time, late int, elapsed time.Duration, err error) {
	acked = make([]time.Time, len(evs))
	slots := make(chan struct{}, 4*concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for i := range evs {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		time.Sleep(time.Until(due))
		select {
		case slots <- struct{}{}:
		default:
			late++
			slots <- struct{}{}
		}
		wg.Go(func() {
			defer func() { <-slots }()
			e := send(evs[i])
			mu.Lock()
			defer mu.Unlock()
			acked[i] = time.Now()
			if e != nil && err == nil {
				err = e
			}
		})
	}
	wg.Wait()
	return acked, late, time.Since(start), err
}

// statementProfile returns the ten statements that took the most
// execution time since pg_stat_statements was last reset, each with its
// microseconds and shared blocks read (from outside shared_buffers) an
// event, over n events.
func statementProfile(b *testing.B, pool *pgxpool.Pool, n int) string {
	b.Helper()
	rows, err := pool.Query(context.Background(), `SELECT total_exec_time * 1000 / $1, shared_blks_read::float8 / $1, calls,
       regexp_replace(left(query, 90), '\s+', ' ', 'g')
FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 10`, n)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var us, reads float64
		var calls int64
		var query string
		if err := rows.Scan(&us, &reads, &calls, &query); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sb, "    %7.1f µs %6.2f blocks read %8d calls  %s\n", us, reads, calls, query)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return sb.String()
}

// loadAverage is the machine's load average over the last minute, five
// and fifteen, as /proc/loadavg gives it.
func loadAverage(b *testing.B) string {
	b.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		b.Fatalf("/proc/loadavg: unexpected %q", raw)
	}
	return strings.Join(f[:3], " ")
}
