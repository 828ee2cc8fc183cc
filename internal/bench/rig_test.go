package bench

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The phases BenchmarkSystem runs on the shared server and privateRun on a
// private cluster, in one place: the pgbench baselines, ingest alone on
// unique events, and the worker's drain of what it accepted.

// baselines are pgbench's figures on a database, measured before our
// binaries write to it: table growth counts against our path, not for it.
type baselines struct {
	tps       float64 // pgbench's per-event transaction, a second
	txs       int     // how many it ran
	pgbenchPG float64 // Postgres CPU-s over them
	ceiling   float64 // events/s of pgbenchCeilingScript
	writes    pgbenchWrites
}

func runBaselines(b *testing.B, dbURL string, pool *pgxpool.Pool, pg server) baselines {
	b.Helper()
	var f baselines
	pg0 := pg.cpu()
	f.tps, f.txs = runPgbench(b, dbURL)
	f.pgbenchPG = pg.cpu() - pg0
	f.ceiling = runPgbenchCeiling(b, dbURL)
	f.writes = runPgbenchWrites(b, dbURL, pool, pg)
	return f
}

// ingestRun is ingest alone at full rate on unique events, after a
// warm-up, and what that cost: ingest's, Postgres' and this process's
// (the senders') CPU-s, and the WAL an event.
type ingestRun struct {
	phase
	cpu, pg, senders float64
	wal              float64
}

// runIngest warms ingest (at base) up with 4 × concurrency events whose
// ids start with warm, then sends unique. With profile, ingest's CPU
// profile covers the unique events alone (HOOKGATE_BENCH_CPUPROFILE).
func runIngest(b *testing.B, client *http.Client, ingest *process, pool *pgxpool.Pool, pg server, warm string, unique []signedEvent, profile bool) ingestRun {
	b.Helper()
	url := ingest.base + "/webhooks/stripe"
	if _, err := hammer("warm-up", 4*concurrency, func(i int) error {
		s := signEvent(fmt.Sprintf("%s_%d", warm, i))
		return postStripe(client, url, s.body, s.header)
	}); err != nil {
		b.Fatal(err)
	}
	cpu0, pg0, self0, wal0 := cpuOf(ingest.pid()), pg.cpu(), selfCPU(), walBytes(b, pool)
	if profile {
		ingest.signal(b, syscall.SIGUSR1)
	}
	p, err := hammer("ingest, unique events", len(unique), func(i int) error {
		return postStripe(client, url, unique[i].body, unique[i].header)
	})
	if err != nil {
		b.Fatal(err)
	}
	r := ingestRun{phase: p, cpu: cpuOf(ingest.pid()) - cpu0, pg: pg.cpu() - pg0, senders: selfCPU() - self0}
	r.wal = float64(walBytes(b, pool)-wal0) / float64(len(unique))
	if profile {
		ingest.signal(b, syscall.SIGUSR2)
	}
	return r
}

// drainRun is the worker's drain of a backlog, and what it cost: the
// worker's, Postgres' and this process's (the downstream's) CPU-s, and
// the WAL an event.
type drainRun struct {
	worker           *process
	rate             float64 // events/s, from the deliveries' completed_at
	cpu, pg, downCPU float64
	wal              float64
}

// runDrain starts a worker with cfg and env and waits until the downstream
// has seen backlog more events than it had; where is the SQL condition on
// webhook_deliveries that picks the drained deliveries for the rate. With
// profile, the worker's CPU profile covers the drain. The worker is left
// running.
func runDrain(b *testing.B, bins binaries, cfg string, env []string, pool *pgxpool.Pool, pg server, down *sink, backlog int, where string, profile bool) drainRun {
	b.Helper()
	want := down.events() + backlog
	pg0, self0, wal0 := pg.cpu(), selfCPU(), walBytes(b, pool)
	r := drainRun{worker: startBinary(b, bins, "worker", cfg, env)}
	if profile {
		r.worker.signal(b, syscall.SIGUSR1)
	}
	waitDrained(b, pool, down, want)
	r.cpu, r.pg, r.downCPU = cpuOf(r.worker.pid()), pg.cpu()-pg0, selfCPU()-self0
	r.wal = float64(walBytes(b, pool)-wal0) / float64(backlog)
	if profile {
		r.worker.signal(b, syscall.SIGUSR2)
	}
	r.rate = spanRate(b, pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries WHERE `+where)
	return r
}
