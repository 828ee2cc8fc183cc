package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// BenchmarkRate drains pre-accepted events through the worker binary to
// two routes of one instant downstream:
//
//	(a) unlimited: no rate;
//	(b) paced by a rate far above what the drain reaches (1,000,000 a
//	    second, burst 1,000), so that it never holds a delivery back.
//
// Drains take turns (b, a, a, b) so that drift in the machine's load falls
// on both alike; each is read as the mean of its two. The ratio (b)/(a) is
// the cost of the rate per delivery: each job waits in its route's line
// and the head of the line takes tokens for every job in it in one
// statement on route_rates. It also reports the takes per delivery (the
// statements the rate wrote, from pg_stat_user_tables). N is
// BENCH_WORKER_EVENTS (default 5000); run it with -benchtime 1x.
func BenchmarkRate(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_WORKER_EVENTS", 5000)
	db := dbtest.NewDB(b)
	down := newSink(b)
	inserter, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{FetchCooldown: insertNotifyCooldown})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(db.Pool, inserter, func(string) int { return 10 })
	routes := fmt.Sprintf(`
  - name: unlimited
    provider: bench
    events: ["*"]
    url: %s/unlimited/ok
  - name: paced
    provider: bench
    events: ["*"]
    url: %s/paced/ok
    rate: {limit: 1000000, per: 1s, burst: 1000}
`, down.URL, down.URL)

	drained := 0
	b.ResetTimer()
	b.StopTimer()
	drain := func(route, prefix string) float64 {
		if _, err := hammer("accept", n, func(i int) error {
			id := fmt.Sprintf("%s%d", prefix, i)
			_, err := store.Claim(ctx, claim.Event{Provider: "bench", ID: id, Type: "checkout.session.completed",
				ContentType: "application/json", Payload: checkoutPayload(id)}, []string{route}, true)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		worker := startWorkerWith(b, db.URL, routes)
		b.StartTimer()
		drained += n
		waitDrained(b, db.Pool, down, drained)
		b.StopTimer()
		worker.stop(b)
		return spanRate(b, db.Pool, `SELECT count(*), min(completed_at), max(completed_at) FROM webhook_deliveries
WHERE starts_with(event_id, '`+prefix+`')`)
	}
	var paced, unlimited float64
	for i, route := range []string{"paced", "unlimited", "unlimited", "paced"} {
		rate := drain(route, fmt.Sprintf("evt_rt%d_", i))
		if route == "paced" {
			paced += rate / 2
		} else {
			unlimited += rate / 2
		}
	}
	if effects := down.effects(); effects != 4*n {
		b.Fatalf("downstream saw %d distinct keys, want %d", effects, 4*n)
	}
	var takes int64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(n_tup_upd, 0) FROM pg_stat_user_tables WHERE relname = 'route_rates'`).Scan(&takes); err != nil {
		b.Fatal(err)
	}

	fmt.Fprintf(os.Stdout, "\nrate, %d workers, %d jobs per drain\n", workerConcurrency(), n)
	fmt.Fprintf(os.Stdout, "%-48s %9.0f events/s\n", "(a) unlimited, mean of 2 drains", unlimited)
	fmt.Fprintf(os.Stdout, "%-48s %9.0f events/s\n", "(b) rate 1,000,000/s, burst 1,000", paced)
	fmt.Fprintf(os.Stdout, "ratio (b)/(a) = %.2f; %.2f takes per paced delivery\n\n", paced/unlimited, float64(takes)/float64(2*n))
	b.ReportMetric(unlimited, "unlimited_events/s")
	b.ReportMetric(paced, "paced_events/s")
	b.ReportMetric(paced/unlimited, "b/a")
}
