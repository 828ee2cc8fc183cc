package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// cpuProfilePath is where BenchmarkSystem has binary (ingest or worker)
// write its CPU profile: hookgate-<binary>.pprof in BENCH_CPUPROFILE_DIR,
// else in the system's temporary directory.
func cpuProfilePath(b *testing.B, binary string) string {
	b.Helper()
	dir := cmp.Or(os.Getenv("BENCH_CPUPROFILE_DIR"), os.TempDir())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, "hookgate-"+binary+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	_ = os.Remove(path)
	return path
}

// signal sends sig to the process.
func (p *process) signal(b *testing.B, sig syscall.Signal) {
	b.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		b.Fatal(err)
	}
}

// profileTop waits for a binary to finish writing the profile at path and
// returns its top consumers (flat and cumulative), as go tool pprof prints them.
func profileTop(b *testing.B, path string) string {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no CPU profile was written to %s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var top strings.Builder
	for _, args := range [][]string{{"-top", "-nodecount", "25"}, {"-top", "-cum", "-nodecount", "40"}} {
		out, err := exec.Command("go", append(append([]string{"tool", "pprof"}, args...), path)...).CombinedOutput()
		if err != nil {
			b.Fatalf("go tool pprof: %v\n%s", err, out)
		}
		top.Write(out)
	}
	return top.String()
}

// privateFigures are the black-box figures on a private cluster.
type privateFigures struct {
	tps                  float64
	pgbenchPG            float64 // Postgres CPU-s per 1,000 pgbench transactions
	ingest               phase
	ingestCPU, ingestPG  float64 // per 1,000 events accepted
	drain                float64
	ceiling              float64 // events/s of pgbenchCeilingScript
	writes               pgbenchWrites
	workerCPU, workerPG  float64 // per 1,000 events drained
	ingestWAL, workerWAL float64 // WAL bytes per event accepted, drained
	ingestRSS, workerRSS int
	floor                phase // one durable commit at 20/s
	durable              string
}

func (f privateFigures) print(out io.Writer) {
	fmt.Fprintf(out, "\nprivate cluster (%s), worker.concurrency %d\n", f.durable, workerConcurrency())
	fmt.Fprintf(out, "%-40s p50 %7.2f ms  p99 %7.2f ms\n", "one commit, 20/s", ms(f.floor.pct(0.50)), ms(f.floor.pct(0.99)))
	fmt.Fprintf(out, "%-40s %9.0f tx/s\n", "pgbench, per-event transaction", f.tps)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", fmt.Sprintf("pgbench, %d events a commit, %d clients", ceilingEvents, ceilingClients), f.ceiling)
	f.writes.print(out)
	fmt.Fprintln(out, f.ingest)
	fmt.Fprintf(out, "%-40s %9.0f events/s\n", "worker drain", f.drain)
	fmt.Fprintf(out, "CPU-s per 1,000 events: ingest %.2f + Postgres %.2f while accepting; worker %.2f + Postgres %.2f while draining;"+
		" pgbench's transaction: Postgres %.2f\n", f.ingestCPU, f.ingestPG, f.workerCPU, f.workerPG, f.pgbenchPG)
	fmt.Fprintf(out, "WAL per event: %.0f B while accepting, %.0f B while draining\n", f.ingestWAL, f.workerWAL)
	fmt.Fprintf(out, "peak RSS: ingest %.0f MiB, worker %.0f MiB\n", float64(f.ingestRSS)/1024, float64(f.workerRSS)/1024)
}

// privateRun starts a cluster of its own with fsync, synchronous_commit and
// full_page_writes on (pgcluster turns them off by default), migrates it
// with `ingest migrate`, and measures there, black-box: one durable commit
// at 20/s (the disk's kind), pgbench's per-event transaction and the
// ceilings, ingest alone at full rate (unique events, ids starting with
// prefix), then the worker at the shipped defaults draining the backlog.
// With a flushDelay, every fsync and fdatasync of the server first sleeps
// that long (testdata/slowflush.c, preloaded): a disk whose flush is slow.
func privateRun(b *testing.B, bins binaries, down *sink, n int, prefix string, flushDelay time.Duration) privateFigures {
	b.Helper()
	cfg := writeConfig(b, down.URL, workerConcurrency())
	dbURL, pool, label, stop := privateCluster(b, bins, cfg, flushDelay)
	defer stop()
	env := []string{"DATABASE_URL=" + dbURL, "BENCH_STRIPE=" + benchSecret}
	pg := postmaster(b, pool)
	f := privateFigures{durable: label}
	f.floor = commitLatency(b, pool, 100, 20)

	base := runBaselines(b, dbURL, pool, pg)
	f.tps, f.pgbenchPG, f.ceiling, f.writes = base.tps, base.pgbenchPG/float64(base.txs)*1000, base.ceiling, base.writes

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	ingest := startBinary(b, bins, "ingest", cfg, env)
	unique := make([]signedEvent, n)
	for i := range unique {
		unique[i] = signEvent(fmt.Sprintf("%s_%d", prefix, i))
	}
	alone := runIngest(b, client, ingest, pool, pg, "evt_pwarm_"+prefix, unique, false)
	f.ingest, f.ingestCPU, f.ingestPG, f.ingestWAL = alone.phase, alone.cpu/float64(n)*1000, alone.pg/float64(n)*1000, alone.wal

	backlog := 4*concurrency + n
	dr := runDrain(b, bins, cfg, env, pool, pg, down, backlog, "event_id LIKE '"+prefix+"_%'", false)
	f.workerCPU, f.workerPG = dr.cpu/float64(backlog)*1000, dr.pg/float64(backlog)*1000
	f.workerWAL, f.drain = dr.wal, dr.rate
	f.ingestRSS, f.workerRSS = peakRSS(ingest.pid()), peakRSS(dr.worker.pid())
	dr.worker.stop(b)
	ingest.stop(b)
	return f
}

// privateCluster starts a cluster of the benchmark's own with fsync,
// synchronous_commit and full_page_writes on (pgcluster turns them off by
// default), and with a flushDelay every fsync and fdatasync of its server
// first sleeps that long (testdata/slowflush.c, preloaded). It migrates
// the cluster's postgres database with `ingest migrate` and cfg, and
// returns its URL, a pool on it, the settings as a label, and stop, which
// closes the pool and stops the cluster (also done when the benchmark
// ends).
func privateCluster(b *testing.B, bins binaries, cfg string, flushDelay time.Duration) (
	dbURL string, pool *pgxpool.Pool, label string, stop func()) {
	b.Helper()
	return privateClusterWith(b, bins, cfg, flushDelay)
}

// privateClusterWith is privateCluster with further server settings
// ("name=value"), named in the label too.
func privateClusterWith(b *testing.B, bins binaries, cfg string, flushDelay time.Duration, settings ...string) (
	dbURL string, pool *pgxpool.Pool, label string, stop func()) {
	b.Helper()
	ctx := context.Background()
	durable := append([]string{"fsync=on", "synchronous_commit=on", "full_page_writes=on"}, settings...)
	c := dbtest.NewCluster(b)
	c.Settings = append(c.Settings, durable...)
	label = strings.Join(durable, ", ")
	if flushDelay > 0 {
		c.Env = []string{"LD_PRELOAD=" + slowFlushLibrary(b),
			fmt.Sprintf("HOOKGATE_BENCH_FLUSH_DELAY_US=%d", flushDelay.Microseconds())}
		label += fmt.Sprintf(", every flush %v slower", flushDelay)
	}
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			if pool != nil {
				pool.Close()
			}
			_ = c.Stop(context.Background())
		}
	}
	b.Cleanup(stop)
	dbURL = c.URL("postgres")
	migrate := exec.Command(filepath.Join(bins.dir, "ingest"), "migrate", "--config", cfg)
	migrate.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "BENCH_STRIPE="+benchSecret)
	if out, err := migrate.CombinedOutput(); err != nil {
		b.Fatalf("ingest migrate on the private cluster: %v\n%s", err, out)
	}
	var err error
	if pool, err = pgxpool.New(ctx, dbURL); err != nil {
		b.Fatal(err)
	}
	return dbURL, pool, label, stop
}

// slowFlushLibrary compiles testdata/slowflush.c with gcc into a directory
// the server's user can read, and returns the library's path.
func slowFlushLibrary(b *testing.B) string {
	b.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "slowflush.c"))
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hookgate-slowflush-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	lib := filepath.Join(dir, "slowflush.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl").CombinedOutput(); err != nil {
		b.Fatalf("building the slow-flush library needs gcc (apt-get install gcc): %v\n%s", err, out)
	}
	return lib
}
