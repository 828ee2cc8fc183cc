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
	"github.com/hookgate/hookgate/internal/testfactory"
)

// BenchmarkSuccessAndBreaker drains pre-accepted events through the worker
// binary to two routes of one instant downstream that answers {"ok":true}:
//
//	(a) today's defaults before success and the breaker: no success
//	    program, breaker: off;
//	(b) success: '.body.ok == true' and the breaker on (its defaults).
//
// Drains take turns (b, a, a, b) so that drift in the machine's load falls
// on both alike; each is read as the mean of its two. The ratio (b)/(a) is
// the cost of reading every answer's body with a jq program and asking the
// breaker before every call (a healthy route's breaker writes nothing).
// Target: at least 0.95. N is BENCH_WORKER_EVENTS (default 5000); run it
// with -benchtime 1x.
func BenchmarkSuccessAndBreaker(b *testing.B) {
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
  - name: plain
    provider: bench
    events: ["*"]
    url: %s/plain/ok
    breaker: off
  - name: checked
    provider: bench
    events: ["*"]
    url: %s/checked/ok
    success: '.body.ok == true'
`, down.URL, down.URL)

	drained := 0
	b.ResetTimer()
	b.StopTimer()
	drain := func(route, prefix string) float64 {
		if _, err := hammer("accept", n, func(i int) error {
			id := fmt.Sprintf("%s%d", prefix, i)
			_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "bench", ID: id, Type: "checkout.session.completed",
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
	var checked, plain float64
	for i, route := range []string{"checked", "plain", "plain", "checked"} {
		rate := drain(route, fmt.Sprintf("evt_sb%d_", i))
		if route == "checked" {
			checked += rate / 2
		} else {
			plain += rate / 2
		}
	}
	if effects := down.effects(); effects != 4*n {
		b.Fatalf("downstream saw %d distinct keys, want %d", effects, 4*n)
	}
	var counted int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM route_breakers WHERE failures > 0 OR state <> 'closed'`).Scan(&counted); err != nil {
		b.Fatal(err)
	}
	if counted > 0 {
		b.Fatal("a healthy drain counted failures in a breaker")
	}

	fmt.Fprintf(os.Stdout, "\nsuccess and breaker, %d workers, %d jobs per drain\n", workerConcurrency(), n)
	fmt.Fprintf(os.Stdout, "%-48s %9.0f events/s\n", "(a) no success, breaker off, mean of 2 drains", plain)
	fmt.Fprintf(os.Stdout, "%-48s %9.0f events/s\n", "(b) success '.body.ok == true', breaker on", checked)
	fmt.Fprintf(os.Stdout, "ratio (b)/(a) = %.2f   (target >= 0.95)\n\n", checked/plain)
	b.ReportMetric(plain, "plain_events/s")
	b.ReportMetric(checked, "checked_events/s")
	b.ReportMetric(checked/plain, "b/a")
}
