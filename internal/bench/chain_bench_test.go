package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// BenchmarkChain drains pre-accepted events through two routes with the
// worker binary: (a) a two-step chain (step2 after step1: each event's
// second job is inserted by the transaction that completes its first) and
// (b) two independent routes (both jobs inserted at ingest). Drains take
// turns (chain, independent, independent, chain), each kind read as the
// mean of its two. The rate is events through both steps per second,
// between the first and the last completion of the drain. N is
// BENCH_CHAIN_EVENTS (default 2000); run it with -benchtime 1x.
func BenchmarkChain(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_CHAIN_EVENTS", 2000)
	db := dbtest.NewDB(b)
	down := newSink(b)
	inserter, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{FetchCooldown: insertNotifyCooldown})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(db.Pool, inserter, func(string) int { return 10 })
	routes := fmt.Sprintf(`
  - name: step1
    provider: bench
    events: ["*"]
    url: %[1]s/step1
  - name: step2
    provider: bench
    events: ["*"]
    url: %[1]s/step2
    after: [step1]
  - name: solo1
    provider: bench
    events: ["*"]
    url: %[1]s/solo1
  - name: solo2
    provider: bench
    events: ["*"]
    url: %[1]s/solo2
`, down.URL)

	drained := 0
	drain := func(chained bool, prefix string) float64 {
		names, after := []string{"solo1", "solo2"}, map[string][]string(nil)
		if chained {
			names, after = []string{"step1", "step2"}, map[string][]string{"step2": {"step1"}}
		}
		if _, err := hammer("accept", n, func(i int) error {
			id := fmt.Sprintf("%s%d", prefix, i)
			_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "bench", ID: id, Type: "checkout.session.completed",
				ContentType: "application/json", Payload: checkoutPayload(id), After: after}, names, true)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		worker := startWorkerWith(b, db.URL, routes)
		b.StartTimer()
		drained += n
		waitDrained(b, db.Pool, down, drained)
		waitUntil(b, db.Pool, `SELECT NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'waiting')`)
		b.StopTimer()
		worker.stop(b)
		var done int
		var first, last time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT count(DISTINCT event_id) FILTER (WHERE status = 'completed'),
    min(completed_at), max(completed_at)
FROM webhook_deliveries WHERE starts_with(event_id, $1)`, prefix).Scan(&done, &first, &last); err != nil {
			b.Fatal(err)
		}
		if done != n {
			b.Fatalf("%d of %d events completed", done, n)
		}
		return float64(n) / last.Sub(first).Seconds()
	}
	b.ResetTimer()
	b.StopTimer()
	var chainRate, soloRate float64
	for i, chained := range []bool{true, false, false, true} {
		rate := drain(chained, fmt.Sprintf("evt_chain%d_", i))
		if chained {
			chainRate += rate / 2
		} else {
			soloRate += rate / 2
		}
	}
	if effects := down.effects(); effects != 8*n {
		b.Fatalf("downstream saw %d distinct keys, want %d", effects, 8*n)
	}
	fmt.Fprintf(os.Stdout, "\nchained routes, %d workers, %d events per drain, two deliveries each\n", workerConcurrency(), n)
	fmt.Fprintf(os.Stdout, "%-44s %9.0f events/s\n", "(a) two-step chain, mean of 2 drains", chainRate)
	fmt.Fprintf(os.Stdout, "%-44s %9.0f events/s\n", "(b) two independent routes, mean of 2 drains", soloRate)
	fmt.Fprintf(os.Stdout, "ratio (a)/(b) = %.2f   (target >= 0.8)\n\n", chainRate/soloRate)
	b.ReportMetric(chainRate, "chain_events/s")
	b.ReportMetric(soloRate, "independent_events/s")
	b.ReportMetric(chainRate/soloRate, "a/b")
}
