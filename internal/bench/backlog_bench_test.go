package bench

import (
	"context"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkBacklog measures the drain the way an operator would, black-box,
// on a private durable cluster (fsync, synchronous_commit and
// full_page_writes on): 64 keep-alive senders post unique Stripe-signed
// events to ingest for BENCH_BACKLOG_SECONDS (default 10) while no worker
// runs, then a worker at the shipped defaults (worker.concurrency 100)
// starts and drains the backlog to an instant downstream. It does this
// BENCH_BACKLOG_ROUNDS times (default 3) in one run, on one cluster, and
// reports per round (each on a database of its own, created and migrated
// for it, and dropped after it) ingest's rate (accepted events over the sending
// time), the drain's rate (the backlog over the time from the worker's
// start to the last event's arrival at the downstream, and over the span
// of the deliveries' completed_at, which leaves the worker's start out),
// their ratio, and the CPU-s per 1,000 events of ingest, the worker,
// Postgres and this process (senders, downstream).
//
// After the rounds, on the same cluster, the baselines: pgbench's
// per-event transaction, the 16-a-commit ceiling from 8 clients (as
// BenchmarkSystem runs it) and from 64 (as many as the senders), and the
// drain's and ingest's writes alone, set-based (the database's own ratio of
// the two, with Postgres' CPU for each).
//
// After the rounds, the pair: both binaries running, events sent open loop
// at 30 % of the rounds' mean ingest rate for BENCH_BACKLOG_PAIR_SECONDS
// (default 20; 0 leaves it out), each timed from ingest's 200 to its
// arrival at the downstream.
//
// BENCH_BACKLOG_WORKER_ENV adds variables to the worker's environment
// (e.g. "GOGC=200"), for trying a setting on the drain alone.
// BENCH_BACKLOG_STATEMENTS=on loads pg_stat_statements and prints, per
// phase, the statements' execution time and calls an event; it costs
// Postgres some CPU, so ratios for the record come from runs without it.
// The worker's CPU profile over the last round's drain is written to
// BENCH_CPUPROFILE_DIR (else the temporary directory) as
// hookgate-worker-backlog.pprof, ingest's over the last round's sending as
// hookgate-ingest-backlog.pprof.
func BenchmarkBacklog(b *testing.B) {
	secs := envInt("BENCH_BACKLOG_SECONDS", 10)
	rounds := envInt("BENCH_BACKLOG_ROUNDS", 3)
	statements := os.Getenv("BENCH_BACKLOG_STATEMENTS") == "on"
	ctx := context.Background()
	bins := buildBinaries(b)
	down := newSink(b)
	cfg := writeConfig(b, down.URL, workerConcurrency())
	var settings []string
	if statements {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_utility=off")
	}
	dbURL, pool, label, stop := privateClusterWith(b, bins, cfg, 0, settings...)
	defer stop()
	if statements {
		if _, err := pool.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
	}
	pg := postmaster(b, pool)
	ingestProfile, workerProfile := cpuProfilePath(b, "ingest-backlog"), cpuProfilePath(b, "worker-backlog")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}

	steal0, ticks0 := machineTicks(b)
	b.ResetTimer()
	var out []backlogRound
	var ingest *process
	var url string
	var workerEnv []string
	var roundPool *pgxpool.Pool
	for r := range rounds {
		last := r == rounds-1
		// Each round on a database of its own, as the black box starts on
		// a new one: no earlier round's rows or dead rows for autovacuum.
		roundURL := roundDatabase(b, bins, cfg, pool, dbURL, fmt.Sprintf("backlog_%d", r))
		var err error
		if roundPool, err = pgxpool.New(ctx, roundURL); err != nil {
			b.Fatal(err)
		}
		env := []string{"DATABASE_URL=" + roundURL, "BENCH_STRIPE=" + benchSecret}
		workerEnv = append(slices.Clone(env), strings.Fields(os.Getenv("BENCH_BACKLOG_WORKER_ENV"))...)
		ingest = startBinary(b, bins, "ingest", cfg, append(env, "HOOKGATE_BENCH_CPUPROFILE="+ingestProfile))
		url = ingest.base + "/webhooks/stripe"
		// Warm-up: connections, prepared statements, the first pages.
		warm := fmt.Sprintf("evt_bwarm%d", r)
		if _, err := hammer("warm-up", 4*concurrency, func(i int) error {
			s := signEvent(fmt.Sprintf("%s_%d", warm, i))
			return postStripe(client, url, s.body, s.header)
		}); err != nil {
			b.Fatal(err)
		}
		runDrainOf(b, bins, cfg, workerEnv, roundPool, pg, down, 4*concurrency, "", warm)

		prefix := fmt.Sprintf("evt_backlog%d", r)
		var round backlogRound
		resetStatements(b, pool, statements)
		vac0 := autovacuums(b, roundPool)
		cpu0, pg0, self0, wal0 := cpuOf(ingest.pid()), pg.cpu(), selfCPU(), walBytes(b, pool)
		if last {
			ingest.signal(b, syscall.SIGUSR1)
		}
		round.ingest = hammerFor("ingest, 64 senders", time.Duration(secs)*time.Second, func(i int) error {
			s := signEvent(fmt.Sprintf("%s_%d", prefix, i))
			return postStripe(client, url, s.body, s.header)
		})
		if round.ingest.err != nil {
			b.Fatal(round.ingest.err)
		}
		if last {
			ingest.signal(b, syscall.SIGUSR2)
		}
		n := round.ingest.n
		round.ingestCPU, round.ingestPG, round.senders = cpuOf(ingest.pid())-cpu0, pg.cpu()-pg0, selfCPU()-self0
		round.ingestWAL = float64(walBytes(b, pool)-wal0) / float64(n)
		round.ingestStatements = statementsIf(b, pool, statements, n)
		vac1 := autovacuums(b, roundPool)

		resetStatements(b, pool, statements)
		profile := ""
		if last {
			profile = workerProfile
		}
		round.drain = runDrainOf(b, bins, cfg, workerEnv, roundPool, pg, down, n, profile, prefix)
		round.drainStatements = statementsIf(b, pool, statements, n)
		round.ingestVacuums, round.drainVacuums = vac1-vac0, autovacuums(b, roundPool)-vac1
		out = append(out, round)
		if !last {
			ingest.stop(b)
			roundPool.Close()
			if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP DATABASE backlog_%d WITH (FORCE)`, r)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var pair phase
	var pairAsked float64
	var pairLate int
	pairSecs := envInt("BENCH_BACKLOG_PAIR_SECONDS", 20)
	if os.Getenv("BENCH_BACKLOG_PAIR_SECONDS") == "0" {
		pairSecs = 0
	}
	if pairSecs > 0 {
		var sum float64
		for _, r := range out {
			sum += r.ingest.rate()
		}
		pairAsked = pairShare * sum / float64(len(out))
		evs := make([]signedEvent, int(pairAsked*float64(pairSecs)))
		for i := range evs {
			evs[i] = signEvent(fmt.Sprintf("evt_bpair_%d", i))
		}
		worker := startBinary(b, bins, "worker", cfg, workerEnv)
		before := down.events()
		acked, late, elapsed, err := openLoop(evs, pairAsked, func(e signedEvent) error { return postStripe(client, url, e.body, e.header) })
		if err != nil {
			b.Fatal(err)
		}
		waitDrained(b, roundPool, down, before+len(evs))
		worker.stop(b)
		pair, pairLate = phase{name: "pair", n: len(evs), elapsed: elapsed}, late
		for i := range evs {
			pair.latencies = append(pair.latencies, max(0, down.arrived(fmt.Sprintf("evt_bpair_%d", i)).Sub(acked[i])))
		}
	}
	steal1, ticks1 := machineTicks(b)
	steal := 100 * float64(steal1-steal0) / float64(max(ticks1-ticks0, 1))
	b.StopTimer()
	ingestRSS := peakRSS(ingest.pid())
	ingest.stop(b)
	roundPool.Close()

	// The baselines last, on the cluster's own database: their rows and
	// their dead rows are nothing the rounds' autovacuum had to visit.
	base := runBaselines(b, dbURL, pool, pg)
	ceiling64, _ := runPgbenchScript(b, dbURL, pgbenchCeilingScript, concurrency)
	ceiling64 *= ceilingEvents

	w := os.Stdout
	fmt.Fprintf(w, "\nbacklog, private cluster (%s), %d senders for %d s, worker.concurrency %d; load average %s\n",
		label, concurrency, secs, workerConcurrency(), loadAverage(b))
	if extra := os.Getenv("BENCH_BACKLOG_WORKER_ENV"); extra != "" {
		fmt.Fprintf(w, "the worker's further environment: %s\n", extra)
	}
	fmt.Fprintf(w, "%-40s %9.0f tx/s\n", "pgbench, per-event transaction", base.tps)
	fmt.Fprintf(w, "%-40s %9.0f events/s\n", fmt.Sprintf("pgbench, %d events a commit, %d clients", ceilingEvents, ceilingClients), base.ceiling)
	fmt.Fprintf(w, "%-40s %9.0f events/s\n", fmt.Sprintf("pgbench, %d events a commit, %d clients", ceilingEvents, concurrency), ceiling64)
	base.writes.print(w)
	per1k := func(sec float64, n int) float64 { return sec / float64(n) * 1000 }
	var ratios, spanRatios []float64
	for i, r := range out {
		n := r.ingest.n
		ratio, spanRatio := r.drain.rate/r.ingest.rate(), r.drain.spanRate/r.ingest.rate()
		ratios, spanRatios = append(ratios, ratio), append(spanRatios, spanRatio)
		fmt.Fprintf(w, "round %d: %d events; ingest %.0f events/s (p99 %.1f ms), drain %.0f events/s from the worker's start"+
			" (%.0f over completed_at); drain / ingest %.2f (%.2f)\n",
			i+1, n, r.ingest.rate(), ms(r.ingest.pct(0.99)), r.drain.rate, r.drain.spanRate, ratio, spanRatio)
		fmt.Fprintf(w, "  CPU-s per 1,000 events: accepting ingest %.3f + Postgres %.3f (senders %.3f);"+
			" draining worker %.3f + Postgres %.3f (downstream %.3f)\n",
			per1k(r.ingestCPU, n), per1k(r.ingestPG, n), per1k(r.senders, n),
			per1k(r.drain.cpu, n), per1k(r.drain.pg, n), per1k(r.drain.downCPU, n))
		fmt.Fprintf(w, "  ingest / the 16-a-commit ceiling: %.2f from %d clients, %.2f from %d\n",
			r.ingest.rate()/base.ceiling, ceilingClients, r.ingest.rate()/ceiling64, concurrency)
		fmt.Fprintf(w, "  cost of a delivery / an acceptance: worker / ingest %.2f, Postgres %.2f, both %.2f; WAL an event %.0f B accepting, %.0f B draining\n",
			r.drain.cpu/r.ingestCPU, r.drain.pg/r.ingestPG, (r.drain.cpu+r.drain.pg)/(r.ingestCPU+r.ingestPG), r.ingestWAL, r.drain.wal)
		fmt.Fprintf(w, "  peak RSS: the worker %.0f MiB; autovacuum and autoanalyze runs: %d accepting, %d draining\n",
			float64(r.drain.rss)/1024, r.ingestVacuums, r.drainVacuums)
		if statements {
			fmt.Fprintf(w, "  accepting, statements an event:\n%s", r.ingestStatements)
			fmt.Fprintf(w, "  draining, statements an event:\n%s", r.drainStatements)
		}
	}
	fmt.Fprintf(w, "peak RSS: ingest %.0f MiB\n", float64(ingestRSS)/1024)
	if pair.n > 0 {
		fmt.Fprintf(w, "the pair, open loop at %.0f events/s (%d sent late): 200 -> downstream p50 %.1f ms, p99 %.1f ms (target p99 <= 100 ms)\n",
			pairAsked, pairLate, ms(pair.pct(0.50)), ms(pair.pct(0.99)))
		b.ReportMetric(ms(pair.pct(0.99)), "pair_p99_ms")
	}
	fmt.Fprintf(w, "drain / ingest over the rounds: %s (mean %.2f; over completed_at: %s); target >= 0.85; CPU steal %.1f %%\n",
		fmtRatios(ratios), mean(ratios), fmtRatios(spanRatios), steal)
	fmt.Fprintf(w, "the database's own ratio, pgbench's drain writes / ingest writes: %.2f (Postgres CPU an event %.2f x)\n",
		base.writes.drain/base.writes.ingest, base.writes.drainPG/base.writes.ingestPG)
	fmt.Fprintf(w, "profiles: go tool pprof -top %s; go tool pprof -top %s\n", workerProfile, ingestProfile)
	b.ReportMetric(mean(ratios), "drain/ingest")
	b.ReportMetric(slices.Min(ratios), "min_drain/ingest")
	b.ReportMetric(steal, "steal_%")
}

// backlogRound is one round of BenchmarkBacklog.
type backlogRound struct {
	ingest                            timedPhase
	ingestCPU, ingestPG, senders      float64
	ingestWAL                         float64
	ingestVacuums, drainVacuums       int
	drain                             backlogDrain
	ingestStatements, drainStatements string
}

// backlogDrain is a worker's drain of a backlog, black-box.
type backlogDrain struct {
	rate     float64 // events over the worker's start to the last arrival
	spanRate float64 // events over the span of their completed_at
	cpu, pg  float64
	downCPU  float64
	wal      float64
	rss      int // the worker's peak, KiB
}

// runDrainOf starts a worker with cfg, waits until the downstream has seen
// the n events whose ids start with prefix, stops the worker and returns
// what the drain cost. With profile, the worker's CPU profile over the
// drain is written there.
func runDrainOf(b *testing.B, bins binaries, cfg string, env []string, pool *pgxpool.Pool, pg server, down *sink, n int, profile, prefix string) backlogDrain {
	b.Helper()
	if profile != "" {
		env = append(slices.Clone(env), "HOOKGATE_BENCH_CPUPROFILE="+profile)
	}
	want := down.events() + n
	pg0, self0, wal0 := pg.cpu(), selfCPU(), walBytes(b, pool)
	start := time.Now()
	worker := startBinary(b, bins, "worker", cfg, env)
	if profile != "" {
		worker.signal(b, syscall.SIGUSR1)
	}
	waitDrained(b, pool, down, want)
	last := down.lastArrival(prefix + "_")
	d := backlogDrain{cpu: cpuOf(worker.pid()), pg: pg.cpu() - pg0, downCPU: selfCPU() - self0}
	d.wal = float64(walBytes(b, pool)-wal0) / float64(n)
	d.rate = float64(n) / last.Sub(start).Seconds()
	if profile != "" {
		worker.signal(b, syscall.SIGUSR2)
		profileTop(b, profile)
	}
	d.rss = peakRSS(worker.pid())
	worker.stop(b)
	d.spanRate = spanRate(b, pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE event_id LIKE '`+prefix+`\_%'`)
	return d
}

// timedPhase is a phase bounded by time rather than by a count.
type timedPhase struct {
	phase
	err error
}

// hammerFor runs op from `concurrency` goroutines, each calling it again as
// soon as it returns, for d; i counts the calls from 0. Calls that have
// started when d ends finish and count.
func hammerFor(name string, d time.Duration, op func(i int) error) timedPhase {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				t0 := time.Now()
				if err := op(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return timedPhase{phase: phase{name: name, n: len(lat), elapsed: time.Since(start), latencies: lat}, err: firstErr}
}

// roundDatabase creates the database name on the cluster pool is on,
// migrates it with `ingest migrate` and returns its URL (dbURL's, with its
// name).
func roundDatabase(b *testing.B, bins binaries, cfg string, pool *pgxpool.Pool, dbURL, name string) string {
	b.Helper()
	if _, err := pool.Exec(context.Background(), `CREATE DATABASE `+name); err != nil {
		b.Fatal(err)
	}
	u, err := neturl.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	migrate := exec.Command(filepath.Join(bins.dir, "ingest"), "migrate", "--config", cfg)
	migrate.Env = append(os.Environ(), "DATABASE_URL="+u.String(), "BENCH_STRIPE="+benchSecret)
	if out, err := migrate.CombinedOutput(); err != nil {
		b.Fatalf("ingest migrate on %s: %v\n%s", name, err, out)
	}
	return u.String()
}

// autovacuums counts the autovacuum and autoanalyze runs on the tables of
// pool's database so far.
func autovacuums(b *testing.B, pool *pgxpool.Pool) int {
	b.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::int FROM pg_stat_user_tables`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// resetStatements empties pg_stat_statements when it is loaded.
func resetStatements(b *testing.B, pool *pgxpool.Pool, on bool) {
	b.Helper()
	if !on {
		return
	}
	if _, err := pool.Exec(context.Background(), `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatal(err)
	}
}

// statementsIf is statementProfile's table when pg_stat_statements is loaded.
func statementsIf(b *testing.B, pool *pgxpool.Pool, on bool, n int) string {
	b.Helper()
	if !on {
		return ""
	}
	return statementProfile(b, pool, n)
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

func fmtRatios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}
