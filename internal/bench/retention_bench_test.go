package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// policy of the retention benchmark: claims terminal for over an hour are
// deleted, payloads of those terminal for over ten minutes cleared.
var benchRetention = claim.Retention{Claims: time.Hour, Payloads: 10 * time.Minute, BatchSize: 1000}

// BenchmarkRetention measures retention on a table of BENCH_RETENTION_TABLE
// claims (default 1,000,000), BENCH_RETENTION_CLAIMS of them (default
// 500,000) due for deletion, in one run on one database:
//
//  1. EXPLAIN (ANALYZE, BUFFERS) of each retention statement and of an
//     export page, which must use an index (it fails otherwise);
//  2. (a) ingest's claim transaction at 64 concurrent callers for
//     BENCH_RETENTION_BASELINE (default 15s), without prune;
//  3. (b) the same load while one Prune deletes the due claims;
//  4. (a') the baseline again, after, so that the table's state before and
//     after prune brackets (b).
//
// It reports rows deleted per second, and (b)'s ingest rate and p99 as
// ratios to the mean of (a) and (a'). Run it with -benchtime 1x.
func BenchmarkRetention(b *testing.B) {
	ctx := context.Background()
	total := envInt("BENCH_RETENTION_TABLE", 1_000_000)
	due := envInt("BENCH_RETENTION_CLAIMS", 500_000)
	baseline := time.Duration(envInt("BENCH_RETENTION_BASELINE", 15)) * time.Second
	if due > total {
		b.Fatalf("BENCH_RETENTION_CLAIMS (%d) exceeds BENCH_RETENTION_TABLE (%d)", due, total)
	}
	db := dbtest.NewDB(b)
	seedStart := time.Now()
	clearable := seedRetention(b, db.Pool, total, due)
	fmt.Fprintf(os.Stdout, "\nretention: %d claims seeded in %s (%d due for deletion, %d payloads due for clearing, %d processing)\n",
		total, time.Since(seedStart).Round(time.Second), due, clearable, (total-due)/10)

	explainRetention(b, db)

	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = concurrency + 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(pool, jobs, func(string) int { return 10 })
	var seq atomic.Int64
	claimOne := func() error {
		id := fmt.Sprintf("evt_load_%d", seq.Add(1))
		body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_%s"}}}`, id, id)
		_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", ObjectID: "in_" + id,
			ContentType: "application/json", Payload: body}, []string{"ship-order"}, true)
		return err
	}
	if _, err := hammer("warm-up", 4*concurrency, func(int) error { return claimOne() }); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	a, err := during("(a) ingest, no prune", func(stop func()) error {
		time.Sleep(baseline)
		stop()
		return nil
	}, claimOne)
	if err != nil {
		b.Fatal(err)
	}
	var pruned claim.PruneResult
	var pruneTime time.Duration
	p, err := during("(b) ingest while prune runs", func(stop func()) error {
		defer stop()
		start := time.Now()
		res, err := claim.NewStore(pool, nil, nil).Prune(ctx, benchRetention)
		pruned, pruneTime = res, time.Since(start)
		return err
	}, claimOne)
	if err != nil {
		b.Fatal(err)
	}
	a2, err := during("(a') ingest, no prune, after", func(stop func()) error {
		time.Sleep(baseline)
		stop()
		return nil
	}, claimOne)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()

	if pruned.Deleted != due || pruned.PayloadsCleared != clearable {
		b.Fatalf("prune deleted %d claims and cleared %d payloads; want %d and %d", pruned.Deleted, pruned.PayloadsCleared, due, clearable)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE event_id LIKE 'evt_due_%'`).Scan(&left); err != nil || left != 0 {
		b.Fatalf("%d due claims left after prune (%v)", left, err)
	}

	baseRate := (a.rate() + a2.rate()) / 2
	baseP99 := (ms(a.pct(0.99)) + ms(a2.pct(0.99))) / 2
	rows := float64(pruned.Deleted) / pruneTime.Seconds()
	fmt.Fprintf(os.Stdout, "\nretention under load, %d concurrent claim transactions, batch_size %d\n", concurrency, benchRetention.BatchSize)
	for _, ph := range []phase{a, p, a2} {
		fmt.Fprintln(os.Stdout, ph)
	}
	fmt.Fprintf(os.Stdout, "prune: %d claims deleted and %d payloads cleared in %s: %.0f claims/s deleted\n",
		pruned.Deleted, pruned.PayloadsCleared, pruneTime.Round(time.Millisecond), rows)
	fmt.Fprintf(os.Stdout, "ingest rate during prune / without = %.2f   (target >= 0.8; %.2f against (a) alone, %.2f against (a') alone)\n",
		p.rate()/baseRate, p.rate()/a.rate(), p.rate()/a2.rate())
	fmt.Fprintf(os.Stdout, "ingest p99 during prune / without  = %.2f   (%.2f against (a) alone, %.2f against (a') alone)\n\n",
		ms(p.pct(0.99))/baseP99, ms(p.pct(0.99))/ms(a.pct(0.99)), ms(p.pct(0.99))/ms(a2.pct(0.99)))
	b.ReportMetric(rows, "deleted/s")
	b.ReportMetric(p.rate()/baseRate, "rate_ratio")
	b.ReportMetric(ms(p.pct(0.99))/baseP99, "p99_ratio")
}

// during runs op from `concurrency` goroutines until control calls stop,
// recording each call's latency.
func during(name string, control func(stop func()) error, op func() error) (phase, error) {
	var (
		mu      sync.Mutex
		lat     []time.Duration
		stopped atomic.Bool
		opErr   error
		once    sync.Once
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for !stopped.Load() {
				t0 := time.Now()
				if err := op(); err != nil {
					once.Do(func() { opErr = err })
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	var elapsed time.Duration
	err := control(func() {
		if !stopped.Swap(true) {
			elapsed = time.Since(start)
		}
	})
	wg.Wait()
	if err == nil {
		err = opErr
	}
	return phase{name: name, n: len(lat), elapsed: elapsed, latencies: lat}, err
}

// seedRetention fills the claim table with total claims, in statements of
// 100,000: due claims (evt_due_*) terminal for two hours and more, a tenth
// of the rest (evt_proc_*) processing, and the others (evt_kept_*)
// terminal recently, a quarter of those long enough for their payload to
// be due. Every claim has one delivery. It returns how many payloads are due.
func seedRetention(b *testing.B, pool *pgxpool.Pool, total, due int) int {
	ctx := context.Background()
	const chunk = 100_000
	insert := func(prefix, status string, n int, terminal string) {
		for from := 1; from <= n; from += chunk {
			to := min(from+chunk-1, n)
			_, err := pool.Exec(ctx, `
WITH c AS (
    INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type,
                                      attempt_count, first_seen_at, updated_at, completed_at, terminal_at)
    SELECT 'stripe', $1 || i, 'invoice.paid', $2,
           convert_to('{"id": "' || $1 || i || '", "type": "invoice.paid", "data": {"object": {"id": "in_' || i || '", "amount": 4200}}}', 'UTF8'),
           'application/json', 1, t, t, CASE WHEN $2 = 'completed' THEN t END, CASE WHEN $2 <> 'processing' THEN t END
    FROM generate_series($3::int, $4::int) AS i
    CROSS JOIN LATERAL (SELECT `+terminal+` AS t) t
    RETURNING provider, event_id, status, completed_at
)
INSERT INTO webhook_deliveries (provider, event_id, route, status, attempt_count, completed_at, updated_at)
SELECT provider, event_id, 'ship-order', status, 1, completed_at, now() FROM c`, prefix, status, from, to)
			if err != nil {
				b.Fatalf("seeding %s claims: %v", prefix, err)
			}
		}
	}
	rest := total - due
	processing := rest / 10
	kept := rest - processing
	clearable := kept / 4
	insert("evt_due_", "completed", due, `now() - interval '2 hours' - make_interval(secs => i / 100.0)`)
	insert("evt_clear_", "completed", clearable, `now() - interval '30 minutes' + make_interval(secs => i / 1000.0)`)
	insert("evt_kept_", "completed", kept-clearable, `now() - interval '5 minutes' + make_interval(secs => i / 10000.0)`)
	insert("evt_proc_", "processing", processing, `now() - interval '3 hours' + make_interval(secs => i / 1000.0)`)
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE webhook_event_claims, webhook_deliveries`); err != nil {
		b.Fatal(err)
	}
	return clearable
}

// recorder is a pgx tracer that keeps the statements run through it.
type recorder struct {
	mu   sync.Mutex
	seen []pgx.TraceQueryStartData
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, d)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// statements returns the statements recorded that contain marker.
func (r *recorder) statements(marker string) []pgx.TraceQueryStartData {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pgx.TraceQueryStartData
	for _, d := range r.seen {
		if strings.Contains(d.SQL, marker) {
			out = append(out, d)
		}
	}
	return out
}

// explainRetention captures the statements Prune, PruneDue and Export
// send (Prune with a policy under which nothing is due, so it changes
// nothing), then runs EXPLAIN (ANALYZE, BUFFERS) of each with the
// benchmark's real cutoffs, in a transaction rolled back afterwards, and
// prints the plans. A plan that reads webhook_event_claims sequentially
// fails the benchmark.
func explainRetention(b *testing.B, db *dbtest.DB) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer traced.Close()
	store := claim.NewStore(traced, nil, nil)
	never := claim.Retention{Claims: 100 * 365 * 24 * time.Hour, Payloads: 100 * 365 * 24 * time.Hour, BatchSize: benchRetention.BatchSize}
	if _, err := store.Prune(ctx, never); err != nil {
		b.Fatal(err)
	}
	if _, err := store.PruneDue(ctx, benchRetention); err != nil {
		b.Fatal(err)
	}
	// Two pages are enough to see the keyset's plan.
	exported := 0
	err = store.Export(ctx, claim.Search{Limit: 1000}, true, func(*claim.Exported) error {
		exported++
		if exported > 1500 {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		b.Fatal(err)
	}
	var now time.Time
	if err := traced.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		b.Fatal(err)
	}
	payloadCut, claimCut := now.Add(-benchRetention.Payloads), now.Add(-benchRetention.Claims)

	clear := rec.statements("UPDATE webhook_event_claims SET payload = NULL")
	del := rec.statements("DELETE FROM webhook_event_claims")
	counts := rec.statements("SELECT count(*) FROM webhook_event_claims")
	pagesSQL := rec.statements("ORDER BY c.first_seen_at, c.provider, c.event_id")
	if len(clear) == 0 || len(del) == 0 || len(counts) < 2 || len(pagesSQL) < 2 {
		b.Fatalf("did not see every statement: %d clear, %d delete, %d count, %d export", len(clear), len(del), len(counts), len(pagesSQL))
	}
	batch := benchRetention.BatchSize
	plans := []struct {
		name string
		sql  string
		args []any
	}{
		{"prune: clear a batch of payloads", clear[0].SQL, []any{payloadCut, claimCut, batch}},
		{"prune: delete a batch of claims", del[0].SQL, []any{claimCut, batch}},
		{"prune --dry-run: count payloads due", counts[0].SQL, []any{payloadCut, claimCut}},
		{"prune --dry-run: count claims due", counts[1].SQL, []any{claimCut}},
		{"export: first page", pagesSQL[0].SQL, pagesSQL[0].Args},
		{"export: a later page (keyset)", pagesSQL[len(pagesSQL)-1].SQL, pagesSQL[len(pagesSQL)-1].Args},
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // EXPLAIN ANALYZE runs the statements: nothing is kept
	fmt.Fprintln(os.Stdout, "\nplans on the seeded claims (EXPLAIN (ANALYZE, BUFFERS); changes rolled back)")
	for _, pl := range plans {
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+pl.sql, pl.args...)
		if err != nil {
			b.Fatalf("explaining %s: %v", pl.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatalf("explaining %s: %v", pl.name, err)
		}
		plan := strings.Join(lines, "\n")
		fmt.Fprintf(os.Stdout, "\n-- %s\n%s\n", pl.name, plan)
		if strings.Contains(plan, "Seq Scan on webhook_event_claims") ||
			!slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Index") }) {
			b.Fatalf("%s does not use an index:\n%s", pl.name, plan)
		}
	}
}

var errStop = errors.New("stop")
