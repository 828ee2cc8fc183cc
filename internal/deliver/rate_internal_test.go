package deliver

import (
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/route"
)

// TestRateLineIsFirstComeFirstServed: a worker's jobs of a paced route (10
// a second, no burst) are let through in the order they asked (the order
// River fetched them in), one token each 100 ms.
func TestRateLineIsFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfg := &config.Config{Worker: config.Worker{Concurrency: 10, RescueAfter: config.Duration(100 * time.Second)},
		Routes: []config.Route{{Name: "paced", Provider: "stripe", Events: []string{"*"}, URL: "http://127.0.0.1:1/paced",
			Rate: &config.Rate{Limit: 10, Per: config.Duration(time.Second)}}}}
	routes, err := route.New(cfg, nil)
	require.NoError(t, err)
	r := newRates(db.Pool, cfg, routes, slog.New(slog.DiscardHandler), nil, time.Second)
	p := r.paced["paced"]
	require.Equal(t, 1, p.lease, "no burst: a lease of one token")

	const jobs = 6
	var mu sync.Mutex
	var order []int
	var at []time.Time
	var wg sync.WaitGroup
	// The test holds the line's turn while the jobs line up, and lets the
	// next one ask only once the last is waiting for its turn (parked in
	// admit's select), so that the order they asked in is known.
	p.turn <- struct{}{}
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := &river.Job[claim.DeliveryArgs]{JobRow: &rivertype.JobRow{ID: int64(i)}, Args: claim.DeliveryArgs{Route: "paced"}}
			if err := r.admit(t.Context(), job); err != nil {
				t.Errorf("job %d: %v", i, err)
				return
			}
			mu.Lock()
			order, at = append(order, i), append(at, time.Now())
			mu.Unlock()
		}()
		// The next job asks once this one is in line.
		require.Eventually(t, func() bool { return waitingForTurn() == i+1 }, 5*time.Second, time.Millisecond)
	}
	<-p.turn
	wg.Wait()
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, order, "let through in the order they asked")
	require.GreaterOrEqual(t, at[jobs-1].Sub(at[0]), time.Duration(jobs-1)*100*time.Millisecond-20*time.Millisecond,
		"one token per 100 ms")
}

// waitingForTurn counts the goroutines parked in admit's own select,
// waiting for the line's turn (not those holding it, which wait in token).
func waitingForTurn() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		if len(lines) > 1 && strings.Contains(lines[0], "[select") && strings.Contains(lines[1], ".(*rates).admit(") {
			n++
		}
	}
	return n
}
