package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// viewerToken is the viewer's API token of TestViewersNeverStallDeliveries.
const viewerToken = "e2e-viewer-token-0123456789"

// viewerRows is how many claims with sequential ids (ord_0000001, ...) the
// stats read in TestViewersNeverStallDeliveries: ids that share most of
// their trigrams, modest enough for a test; docs/benchmarks.md has 1M.
const viewerRows = 20_000

// TestViewersNeverStallDeliveries runs ingest and a worker whose API reads
// through a read pool of two connections, beside a worker pool of six,
// over claims with sequential ids. First 25 viewers read the stats without
// pause while events arrive: every event is delivered, /readyz answers
// 200, and every viewer is answered, 200 or 503 (never a 500). Then eight
// viewers list the audit while the test holds a lock on it, so that the
// read pool's two connections wait on it (seen in pg_stat_activity), and
// 25 more read the stats: they are answered 503 naming the read pool's
// wait timeout, while new events are delivered and /readyz answers 200,
// with the read pool's two connections still waiting, from before the first of those
// events to after the last was delivered. Without a pool of their own the
// eight readers would hold all six of the worker's connections.
func TestViewersNeverStallDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, []route{{name: "fulfil", events: []string{"order.paid"}}})
	f, err := os.OpenFile(s.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`console:
  tokens:
    - {name: dashboard, role: viewer, token_env: E2E_VIEWER_TOKEN}
  read_pool: {max_conns: 2, statement_timeout: 2m}
`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s.env = append(s.env, "E2E_VIEWER_TOKEN="+viewerToken)
	seed := make([]*testfactory.ClaimOpts, viewerRows)
	for i := range seed {
		g := i + 1
		seed[i] = &testfactory.ClaimOpts{Provider: provider, EventID: fmt.Sprintf("ord_%07d", g), EventType: "order.paid",
			Status: claim.Completed, FirstSeenAt: testfactory.Ago(time.Duration(viewerRows-g) * time.Second),
			Deliveries: map[string]*testfactory.DeliveryOpts{"fulfil": {Status: claim.DeliveryCompleted}}}
	}
	testfactory.Claims(ctx, t, s.db.Pool, seed)
	_, err = s.db.Pool.Exec(ctx, `ANALYZE webhook_event_claims, webhook_deliveries`)
	require.NoError(t, err)
	ingest, worker := s.ingest(), s.worker()
	deliver := func(batch string) {
		t.Helper()
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = fmt.Sprintf("evt_view_%s_%d", batch, i)
			s.claimed(ingest, event{id: ids[i], typ: "order.paid"})
		}
		for _, id := range ids {
			s.waitStatus(id, claim.Completed, 60*time.Second)
		}
		status, body := get(t, worker.url+"/readyz")
		require.Equal(t, http.StatusOK, status, body)
	}

	stats := startViewers(worker.url+"/api/v1/stats?window=744h", 25)
	require.Eventually(t, func() bool { return stats.count(http.StatusOK) > 0 }, 60*time.Second, 10*time.Millisecond,
		"viewers read the stats")
	deliver("a")
	answers := stats.stop()
	for status := range answers {
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, status, "%v", answers)
	}

	lock, err := s.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	audit := startViewers(worker.url+"/api/v1/audit", 8)
	var held []string
	require.Eventually(t, func() bool {
		held = waitingReads(t, s)
		return len(held) == 2
	}, 30*time.Second, 10*time.Millisecond, "the read pool's two connections wait on the audit: %v", held)
	stats = startViewers(worker.url+"/api/v1/stats?window=744h", 25)
	deliver("b")
	require.Equal(t, held, waitingReads(t, s), "the read pool's two connections stayed held throughout")
	require.Eventually(t, func() bool { return stats.count(http.StatusServiceUnavailable) > 0 }, 30*time.Second, 10*time.Millisecond,
		"viewers are answered")
	answers = stats.stop()
	require.Equal(t, []int{http.StatusServiceUnavailable}, keys(answers), "%v", answers)
	require.Contains(t, stats.last(http.StatusServiceUnavailable), "console.read_pool.wait_timeout (2s)")

	require.NoError(t, lock.Rollback(ctx))
	require.Eventually(t, func() bool { return audit.count(http.StatusOK) > 0 }, 30*time.Second, 10*time.Millisecond,
		"the held reads are answered once the lock is gone")
	answers = audit.stop()
	for status := range answers {
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, status, "%v", answers)
	}
}

// waitingReads returns the pids of the read pool's sessions waiting for a
// lock, in order.
func waitingReads(t *testing.T, s *stack) []string {
	t.Helper()
	rows, err := s.db.Pool.Query(context.Background(), `SELECT pid::text FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'hookgate reads' ORDER BY pid`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// viewers are n goroutines sending GET url with the viewer's token one
// request after another until stopped, counting the answers by status.
type viewers struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	answers map[int]int
	bodies  map[int]string
}

func startViewers(url string, n int) *viewers {
	ctx, cancel := context.WithCancel(context.Background())
	v := &viewers{cancel: cancel, answers: map[int]int{}, bodies: map[int]string{}}
	for range n {
		v.wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+viewerToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // stopped
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				v.mu.Lock()
				v.answers[resp.StatusCode]++
				v.bodies[resp.StatusCode] = string(body)
				v.mu.Unlock()
			}
		})
	}
	return v
}

// stop stops the viewers and returns their answers' count by status.
func (v *viewers) stop() map[int]int {
	v.cancel()
	v.wg.Wait()
	return v.answers
}

// count is how many answers of status came so far.
func (v *viewers) count(status int) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.answers[status]
}

// last is the body of the last answer of status.
func (v *viewers) last(status int) string { return v.bodies[status] }

func keys(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// get sends GET url and returns the answer's status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(body))
}
