package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// BenchmarkAttemptHistory measures what the attempt history costs the
// drain's end transactions: the batches of outcomes (claim.Store.EndJobs with
// no jobs, so River's two statements run over none) that complete deliveries,
// written (a) without history rows, as before attempt history, then (b)
// with them, each attempt carrying a BENCH_HISTORY_RESPONSE-byte response
// (default 256), in phases taking turns: a, b, b', a'. Each phase ends
// BENCH_HISTORY_DELIVERIES deliveries (default 20,000) of a claim each, in
// batches of 128 from 4 concurrent callers, and each its own set of
// deliveries, seeded beforehand. It reports the rate with history over the
// rate without (target >= 0.9). Run it with -benchtime 1x.
func BenchmarkAttemptHistory(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_HISTORY_DELIVERIES", 20_000)
	response := strings.Repeat("r", envInt("BENCH_HISTORY_RESPONSE", 256))
	db := dbtest.NewDB(b)
	phases := []struct {
		name    string
		history bool
	}{{"(a) without history", false}, {"(b) with history", true}, {"(b') with history", true}, {"(a') without history", false}}
	for i := range phases {
		seedProcessing(b, db.Pool, fmt.Sprintf("evt_h%d_", i), n)
	}
	store := claim.NewStore(db.Pool, nil, nil)
	const batch, callers = 128, 4
	rates := make([]float64, len(phases))
	b.ResetTimer()
	for p, ph := range phases {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for from := c * batch; from < n; from += callers * batch {
					attempts := make([]claim.Attempt, 0, batch)
					for i := from; i < min(from+batch, n); i++ {
						r := claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true, Spent: 1}
						if ph.history {
							r.Call = &claim.Call{Attempt: 1, StartedAt: time.Now(), Duration: 3 * time.Millisecond, Status: 201, Response: &response}
						}
						attempts = append(attempts, claim.Attempt{
							Key: claim.Key{Provider: "stripe", EventID: fmt.Sprintf("evt_h%d_%d", p, i+1), Route: "ship-order"}, Result: r})
					}
					_, recorded, err := store.EndJobs(ctx, attempts, nil)
					if err != nil {
						errs <- err
						return
					}
					for i, ok := range recorded {
						if !ok {
							errs <- fmt.Errorf("%s was not recorded", attempts[i].Key)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		rates[p] = float64(n) / time.Since(start).Seconds()
	}
	b.StopTimer()
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts`).Scan(&rows); err != nil || rows != 2*n {
		b.Fatalf("%d history rows (%v); want %d", rows, err, 2*n)
	}
	fmt.Fprintf(os.Stdout, "\nattempt history: %d deliveries ended per phase, batches of %d from %d callers\n", n, batch, callers)
	for p, ph := range phases {
		fmt.Fprintf(os.Stdout, "%-22s %8.0f ends/s\n", ph.name, rates[p])
	}
	ratio := (rates[1] + rates[2]) / (rates[0] + rates[3])
	fmt.Fprintf(os.Stdout, "end rate with history / without = %.2f   (target >= 0.9; b/a %.2f, b'/a' %.2f)\n\n",
		ratio, rates[1]/rates[0], rates[2]/rates[3])
	b.ReportMetric(ratio, "history_ratio")
}

// seedProcessing inserts n processing claims named prefix1..prefixn, each
// with one processing delivery of route ship-order, and analyzes the tables.
func seedProcessing(b *testing.B, pool *pgxpool.Pool, prefix string, n int) {
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
WITH c AS (
    INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, attempt_count)
    SELECT 'stripe', $1 || i, 'invoice.paid', 'processing', convert_to('{"id": "' || $1 || i || '"}', 'UTF8'), 'application/json', 0
    FROM generate_series(1, $2::int) AS i
    RETURNING provider, event_id
)
INSERT INTO webhook_deliveries (provider, event_id, route, status)
SELECT provider, event_id, 'ship-order', 'processing' FROM c`, prefix, n)
	if err != nil {
		b.Fatalf("seeding %s: %v", prefix, err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE webhook_event_claims, webhook_deliveries`); err != nil {
		b.Fatal(err)
	}
}
