package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
)

// dayShape is the traffic BenchmarkDay's database has held:
// BENCH_DAY=<events/s>x<duration>, default 5x24h (432,000 events).
type dayShape struct {
	rate float64       // events a second
	span time.Duration // for how long
}

func (d dayShape) events() int { return int(d.rate * d.span.Seconds()) }

func (d dayShape) String() string {
	return fmt.Sprintf("%g events/s for %s (%d events)", d.rate, d.span, d.events())
}

// dayFromEnv reads BENCH_DAY; a bad value fails at once, not after a run.
func dayFromEnv(b *testing.B) dayShape {
	b.Helper()
	raw := cmp.Or(os.Getenv("BENCH_DAY"), "5x24h")
	rate, span, ok := strings.Cut(raw, "x")
	r, err1 := strconv.ParseFloat(rate, 64)
	d, err2 := time.ParseDuration(span)
	if !ok || err1 != nil || err2 != nil || r <= 0 || d <= 0 {
		b.Fatalf("BENCH_DAY must be <events/s>x<duration>, such as 5x24h; got %q", raw)
	}
	return dayShape{rate: r, span: d}
}

// dayJobRetention is how long the day's River job rows of finished
// deliveries stayed, BENCH_DAY_JOBS (a Go duration, default 0): 0 as the
// worker leaves them now (deleted in their end transaction), 24h as River
// kept them before (its CompletedJobRetentionPeriod's default), minutes as
// a short retention would.
func dayJobRetention(b *testing.B) time.Duration {
	b.Helper()
	d, err := time.ParseDuration(cmp.Or(os.Getenv("BENCH_DAY_JOBS"), "0s"))
	if err != nil || d < 0 {
		b.Fatalf("BENCH_DAY_JOBS must be a duration such as 0s, 10m or 24h; got %q", os.Getenv("BENCH_DAY_JOBS"))
	}
	return d
}

// dayStorage reports whether BenchmarkDay keeps migration 00020's storage
// parameters (BENCH_DAY_STORAGE=on, the default) or resets them to
// Postgres' defaults first (off), to measure what they give.
func dayStorage(b *testing.B) bool {
	b.Helper()
	switch v := cmp.Or(os.Getenv("BENCH_DAY_STORAGE"), "on"); v {
	case "on":
		return true
	case "off":
		return false
	default:
		b.Fatalf("BENCH_DAY_STORAGE must be on or off; got %q", v)
		return false
	}
}

// resetStorageSQL gives the tables 00020 tunes Postgres' default storage
// parameters back.
const resetStorageSQL = `
ALTER TABLE webhook_event_claims RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
ALTER TABLE webhook_deliveries RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
ALTER TABLE webhook_attempts RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
ALTER TABLE river_job RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor)`

// seedDaySQL writes the events $1..$2 of a day that began at $3 and ran
// at $4 events a second, as the binaries leave them once delivered: a
// completed claim with its raw body, its one delivery (route sink), the
// delivery's attempt history row. Set-based, one statement a chunk.
const seedDaySQL = `
WITH c AS (
    INSERT INTO webhook_event_claims (provider, event_id, event_type, object_id, status, payload, content_type,
                                      attempt_count, first_seen_at, updated_at, completed_at, terminal_at)
    SELECT 'stripe', 'evt_day_' || i, 'invoice.paid', 'in_evt_day_' || i, 'completed',
           convert_to('{"id": "evt_day_' || i || '", "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_evt_day_' || i || '"}}}', 'UTF8'),
           'application/json', 1, t, t + interval '20 ms', t + interval '20 ms', t + interval '20 ms'
    FROM generate_series($1::bigint, $2::bigint) AS i
    CROSS JOIN LATERAL (SELECT $3::timestamptz + make_interval(secs => (i - 1) / $4::float8) AS t) t
    RETURNING provider, event_id, completed_at
), d AS (
    INSERT INTO webhook_deliveries (provider, event_id, route, status, attempt_count, created_at, completed_at, updated_at)
    SELECT provider, event_id, 'sink', 'completed', 1, completed_at - interval '20 ms', completed_at, completed_at FROM c
    RETURNING provider, event_id, route, completed_at
)
INSERT INTO webhook_attempts (provider, event_id, route, attempt, started_at, duration_ms, status_code)
SELECT provider, event_id, route, 1, completed_at - interval '5 ms', 1, 200 FROM d`

// seedJobsSQL writes the River job rows the day's deliveries finalized
// since $1 left (River's completed state, as its completion writes it),
// on queue $2.
const seedJobsSQL = `
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, created_at, scheduled_at,
                       attempt, attempted_at, attempted_by, finalized_at, tags, metadata)
SELECT jsonb_build_object('provider', d.provider, 'event_id', d.event_id, 'route', d.route), '` + claim.DeliveryKind + `',
       10, 1, $2, 'completed', d.created_at, d.created_at, 1, d.created_at + interval '5 ms', ARRAY['day'],
       d.completed_at, '{}', '{}'
FROM webhook_deliveries d
WHERE d.completed_at >= $1 AND starts_with(d.event_id, 'evt_day_')`

// seedDay fills the database with day's events (ids evt_day_*), in
// statements of 100,000, and the job rows that jobsKept left, then
// vacuums and analyzes what it wrote, as autovacuum would have over the
// day, and checkpoints, so that the phases after it start from the same
// state as those before it. It returns how long seeding took.
func seedDay(b *testing.B, pool *pgxpool.Pool, day dayShape, jobsKept time.Duration) time.Duration {
	b.Helper()
	ctx := context.Background()
	t0 := time.Now()
	begin := t0.Add(-day.span)
	const chunk = 100_000
	for from := 1; from <= day.events(); from += chunk {
		to := min(from+chunk-1, day.events())
		if _, err := pool.Exec(ctx, seedDaySQL, from, to, begin, day.rate); err != nil {
			b.Fatalf("seeding the day's events %d-%d: %v", from, to, err)
		}
	}
	if jobsKept > 0 {
		if _, err := pool.Exec(ctx, seedJobsSQL, t0.Add(-jobsKept), claim.Queue("sink")); err != nil {
			b.Fatalf("seeding the day's job rows: %v", err)
		}
	}
	for _, q := range []string{`VACUUM ANALYZE webhook_event_claims, webhook_deliveries, webhook_attempts, river_job`, `CHECKPOINT`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	return time.Since(t0)
}

// tableSizes prints the rows and the size (heap and indexes) of the
// tables a day grows.
func tableSizes(b *testing.B, out io.Writer, pool *pgxpool.Pool, when string) {
	b.Helper()
	rows, err := pool.Query(context.Background(), `SELECT relname, n_live_tup, n_dead_tup,
       pg_size_pretty(pg_table_size(relid)), pg_size_pretty(pg_indexes_size(relid)), autovacuum_count
FROM pg_stat_user_tables
WHERE relname IN ('webhook_event_claims', 'webhook_deliveries', 'webhook_attempts', 'river_job') ORDER BY relname`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	fmt.Fprintf(out, "tables %s:\n", when)
	for rows.Next() {
		var name, heap, idx string
		var live, dead, autovacuums int64
		if err := rows.Scan(&name, &live, &dead, &heap, &idx, &autovacuums); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(out, "  %-22s %10d live %9d dead rows, heap %8s, indexes %8s, autovacuums so far %d\n",
			name, live, dead, heap, idx, autovacuums)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
}

// jobEnd is what ending a job costs the database, one way.
type jobEnd struct {
	wal     float64       // WAL bytes a job, the end and what cleans up after it
	elapsed time.Duration // for all of them
}

// jobEndLever measures the two ways of ending k finished delivery jobs,
// 128 a statement as the worker's ends batch them, on this database:
// River's (completed, then deleted by River's job cleaner after the
// retention, then vacuumed) and the worker's now (deleted in the end,
// then vacuumed). Each starts after a checkpoint, on running jobs of its
// own queue; autovacuum is kept off river_job meanwhile, so that each
// way's vacuum is counted with it, and given back after.
func jobEndLever(b *testing.B, pool *pgxpool.Pool, k int) (complete, del jobEnd) {
	b.Helper()
	ctx := context.Background()
	exec := func(q string, args ...any) {
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			b.Fatalf("%s: %v", strings.Fields(q)[0], err)
		}
	}
	exec(`ALTER TABLE river_job SET (autovacuum_enabled = false)`)
	defer exec(`ALTER TABLE river_job RESET (autovacuum_enabled)`)
	run := func(queue string, end ...string) jobEnd {
		exec(`INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, tags, metadata,
                       attempt, attempted_at, attempted_by)
SELECT jsonb_build_object('provider', 'lever', 'event_id', $1 || g, 'route', 'sink'), '`+claim.DeliveryKind+`', 10, 1,
       $1, 'running', now(), '{}', '{}', 1, now(), ARRAY['lever']
FROM generate_series(1, $2::int) g`, queue, k)
		exec(`CHECKPOINT`)
		wal0, t0 := walBytes(b, pool), time.Now()
		for range (k + 127) / 128 {
			exec(end[0], queue)
		}
		for _, q := range end[1:] {
			exec(q, queue)
		}
		exec(`VACUUM river_job`)
		return jobEnd{wal: float64(walBytes(b, pool)-wal0) / float64(k), elapsed: time.Since(t0)}
	}
	next := `(SELECT id FROM river_job WHERE queue = $1 AND state = 'running' ORDER BY id LIMIT 128)`
	complete = run("lever_complete",
		`UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id IN `+next,
		`DELETE FROM river_job WHERE queue = $1 AND state = 'completed'`)
	del = run("lever_delete", `DELETE FROM river_job WHERE id IN `+next)
	return complete, del
}
