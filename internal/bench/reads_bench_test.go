package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// beforeCap is the statement timeout of the baseline's reads: past it a
// read of the previous statements is reported as over it.
const beforeCap = 30 * time.Second

// beforeRuns is how many times the baseline runs each read: more than the
// five after which Postgres weighs a prepared statement's generic plan,
// as the console's statements are prepared and run again and again.
const beforeRuns = 7

// The statements of the stats and the overview's activity before
// migration 26: they joined the claims first seen in the window to their
// deliveries. The stats' other two statements are unchanged.
const (
	beforeStatsDeliveriesSQL = `SELECT d.route, d.status, count(*) FROM webhook_event_claims c
JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE c.first_seen_at >= now() - make_interval(secs => $1) GROUP BY d.route, d.status`
	beforeStatsOldestDeliverySQL = `SELECT d.route, extract(epoch FROM now() - min(c.first_seen_at))::float8 FROM webhook_deliveries d
JOIN webhook_event_claims c ON c.provider = d.provider AND c.event_id = d.event_id
WHERE d.status = 'processing' GROUP BY d.route`
	beforeActivitySQL = `
SELECT d.route, b.i,
       count(*),
       count(*) FILTER (WHERE d.status = 'completed'),
       count(*) FILTER (WHERE d.status = 'failed')
FROM webhook_event_claims c
CROSS JOIN LATERAL (SELECT floor(extract(epoch FROM c.first_seen_at - $1::timestamptz) / $2::float8)::int AS i) b
JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE c.first_seen_at >= $1 AND c.first_seen_at < $1::timestamptz + make_interval(secs => $2::float8 * $3::int)
GROUP BY d.route, b.i
ORDER BY d.route, b.i`
)

// BenchmarkConsoleReads measures the reads of the stats, the overview and
// the claims list over BENCH_READS_CLAIMS claims (default 1,000,000) with
// sequential ids (evt_day_1, evt_day_2, ...: ids that share most of their
// trigrams), seeded as BenchmarkDay seeds its day (seedDay: a day of
// completed claims, each with a delivery made with it and an attempt),
// the newest 0.2 % then processing. Each read runs BENCH_READS_REQUESTS
// times (default 10) through a claim.Store over the read pool, as the
// worker's console reads now (the server's default costs), and reports its
// median. Then, in the same run, the baseline of the stats and the
// overview: the statements before migration 26, which joined the window's
// claims to their deliveries, each read run beforeRuns times through the
// same kind of pool, with a statement timeout of beforeCap, and its median
// reported (over beforeCap when one read timed out). A lookup of one claim
// by its key is the plain indexed read beside them. Run it with
// -benchtime 1x.
func BenchmarkConsoleReads(b *testing.B) {
	ctx := context.Background()
	total := envInt("BENCH_READS_CLAIMS", 1_000_000)
	k := envInt("BENCH_READS_REQUESTS", 10)
	db := dbtest.NewDB(b)
	seeded := seedDay(b, db.Pool, dayShape{rate: float64(total) / 86400, span: 24 * time.Hour}, 0)
	for _, q := range []string{
		fmt.Sprintf(`UPDATE webhook_event_claims SET status = 'processing', completed_at = NULL
WHERE event_id IN (SELECT event_id FROM webhook_event_claims ORDER BY first_seen_at DESC LIMIT %d)`, total/500),
		`UPDATE webhook_deliveries d SET status = 'processing', completed_at = NULL
FROM webhook_event_claims c WHERE c.provider = d.provider AND c.event_id = d.event_id AND c.status = 'processing'`,
		`VACUUM ANALYZE webhook_event_claims, webhook_deliveries`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	fmt.Fprintf(os.Stdout, "\nconsole reads: %d claims with sequential ids seeded in %s\n", total, seeded.Round(time.Second))

	pool := readPool(b, db.URL, time.Minute)
	now := claim.NewStore(pool, nil, nil)
	prev := readPool(b, db.URL, beforeCap)
	prevStore := claim.NewStore(prev, nil, nil)
	since := time.Now().Add(-24 * time.Hour)
	// beforeStats runs the stats' four statements as they were.
	beforeStats := func(window time.Duration) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`SELECT provider, status, count(*) FROM webhook_event_claims
WHERE first_seen_at >= now() - make_interval(secs => $1) GROUP BY provider, status`, []any{window.Seconds()}},
			{beforeStatsDeliveriesSQL, []any{window.Seconds()}},
			{`SELECT provider, extract(epoch FROM now() - min(first_seen_at))::float8 FROM webhook_event_claims
WHERE status = 'processing' GROUP BY provider`, nil},
			{beforeStatsOldestDeliverySQL, nil},
		} {
			if err := drain(ctx, prev, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	}
	reads := []struct {
		name   string
		read   func(*claim.Store) error
		before func() error // the same read before migration 26; nil where it has not changed
	}{
		{"one claim by key (plain indexed read)", func(s *claim.Store) error {
			_, _, err := s.Get(ctx, "stripe", fmt.Sprintf("evt_day_%d", total/2))
			return err
		}, nil},
		{"stats, 24h (GET /api/v1/stats)", func(s *claim.Store) error { _, err := s.Stats(ctx, 24*time.Hour); return err },
			func() error { return beforeStats(24 * time.Hour) }},
		{"stats, 1h", func(s *claim.Store) error { _, err := s.Stats(ctx, time.Hour); return err },
			func() error { return beforeStats(time.Hour) }},
		{"overview: status counts + activity, 24h", func(s *claim.Store) error {
			if _, err := s.StatusCounts(ctx, since); err != nil {
				return err
			}
			_, err := s.RouteActivity(ctx, since, time.Hour, 24)
			return err
		}, func() error {
			if _, err := prevStore.StatusCounts(ctx, since); err != nil {
				return err
			}
			return drain(ctx, prev, beforeActivitySQL, since, time.Hour.Seconds(), 24)
		}},
		{"claims, event_id=*5*, limit 500", func(s *claim.Store) error { return page(ctx, s, claim.Search{EventIDContains: "5", Limit: 500}) }, nil},
		{"claims, event_id=*y_12345*, limit 50", func(s *claim.Store) error {
			return page(ctx, s, claim.Search{EventIDContains: "y_12345", Limit: 50})
		}, nil},
		{"claims, newest 50", func(s *claim.Store) error { return page(ctx, s, claim.Search{}) }, nil},
	}
	if err := reads[0].read(now); err != nil { // opens its connections
		b.Fatal(err)
	}
	b.ResetTimer()
	nowMedians := make([]time.Duration, len(reads))
	for i, r := range reads {
		nowMedians[i] = median(b, r.name, k, func() error { return r.read(now) })
		if nowMedians[i] < 0 {
			b.Fatalf("%s ran past its statement timeout", r.name)
		}
	}
	b.StopTimer()

	fmt.Fprintf(os.Stdout, "\n%d claims, sequential ids; median of %d reads now, of %d before (the statements before migration 26)\n", total, k, beforeRuns)
	fmt.Fprintf(os.Stdout, "%-42s %12s %12s %10s %14s\n", "read", "now ms", "before ms", "before/now", "now/plain read")
	if err := reads[0].read(prevStore); err != nil { // opens its connections
		b.Fatal(err)
	}
	for i, r := range reads {
		shown, ratio := "-", "-"
		if r.before != nil {
			prev := median(b, r.name+" (before)", beforeRuns, r.before)
			shown = fmt.Sprintf("%.1f", ms(prev))
			if prev < 0 {
				shown = fmt.Sprintf("> %.0f", ms(beforeCap))
				prev = beforeCap
			}
			ratio = fmt.Sprintf("%.1f", float64(prev)/float64(nowMedians[i]))
		}
		fmt.Fprintf(os.Stdout, "%-42s %12.2f %12s %10s %14.1f\n", r.name, ms(nowMedians[i]), shown, ratio,
			float64(nowMedians[i])/float64(nowMedians[0]))
	}
	b.ReportMetric(ms(nowMedians[1]), "stats_ms")
	b.ReportMetric(ms(nowMedians[3]), "overview_ms")
}

// readPool returns a read pool of the database at url, with statement
// timeout timeout, as the worker opens it for the console.
func readPool(b *testing.B, url string, timeout time.Duration) *claim.ReadPool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	p, err := claim.OpenReadPool(cfg, claim.ReadLimits{MaxConns: 2, StatementTimeout: timeout, WaitTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	return p
}

// drain runs sql through p and reads every row it returns.
func drain(ctx context.Context, p *claim.ReadPool, sql string, args ...any) error {
	rows, err := p.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.Err()
}

// page reads one page of the claims list as the console does: the claims
// f matches, then their deliveries.
func page(ctx context.Context, s *claim.Store, f claim.Search) error {
	cs, err := s.SearchClaims(ctx, f)
	if err != nil {
		return err
	}
	keys := make([]claim.EventKey, len(cs))
	for i, c := range cs {
		keys[i] = claim.EventKey{Provider: c.Provider, EventID: c.EventID}
	}
	_, err = s.DeliveriesOf(ctx, keys)
	return err
}

// median runs read n times and returns the median duration; -1 when a
// read ran past its statement timeout.
func median(b *testing.B, name string, n int, read func() error) time.Duration {
	b.Helper()
	ds := durations(b, name, n, read)
	if ds == nil {
		return -1
	}
	return ds[len(ds)/2]
}

// durations runs read n times and returns its durations, shortest first;
// nil when a read ran past its statement timeout.
func durations(b *testing.B, name string, n int, read func() error) []time.Duration {
	b.Helper()
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		err := read()
		if errors.Is(err, claim.ErrReadTimeout) {
			return nil
		}
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds
}
