package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

const cellSettle = 30 * time.Second

// waitDelivered waits until event id of provider pI had its one effect
// downstream and its claim is completed in cell i.
func (s *cellStack) waitDelivered(i int, id string, timeout time.Duration) {
	s.t.Helper()
	require.EventuallyWithT(s.t, func(t *assert.CollectT) {
		require.Equal(t, 1, s.down.effectsOf(cellKey(i, id)), "one effect for %s/%s", cellProvider(i), id)
		require.Equal(t, 1, s.count(i, `SELECT count(*) FROM webhook_event_claims WHERE provider = $1 AND event_id = $2 AND status = 'completed'`,
			cellProvider(i), id), "claim %s/%s completed in cell %s", cellProvider(i), id, cellName(i))
	}, timeout, 25*time.Millisecond)
}

// TestCellsTwo runs ingest and worker over two cells. Each provider's
// claims, deliveries and jobs are in its own cell's database and none in
// the other's; the same events sent to two ingest replicas at once are
// claimed once per cell; and a worker of one cell killed mid-attempt
// (SIGKILL) leaves the other cell delivering, its own attempt taken up
// again once a worker of its cell is back, with one effect.
func TestCellsTwo(t *testing.T) {
	t.Parallel()
	s := newCellStack(t, 2)
	in1, in2 := s.ingest(), s.ingest()

	t.Run("each provider in its own cell, duplicates claimed once", func(t *testing.T) {
		for i := range 2 {
			for n := range 5 {
				id := fmt.Sprintf("evt_place_%d", n)
				var codes [2]int
				var wg sync.WaitGroup
				for r, in := range []*proc{in1, in2} {
					wg.Go(func() { codes[r] = postCell(http.DefaultClient, in.url, i, id) })
				}
				wg.Wait()
				require.Equal(t, [2]int{http.StatusOK, http.StatusOK}, codes, "both replicas acknowledge %s/%s", cellProvider(i), id)
			}
		}
		// No worker yet: every job is still there to be seen.
		for i := range 2 {
			require.Equal(t, []string{cellProvider(i)}, s.providersIn(i), "claims in cell %s", cellName(i))
			require.Equal(t, 5, s.count(i, `SELECT count(*) FROM webhook_event_claims`), "each event claimed once in cell %s", cellName(i))
			require.Equal(t, 5, s.count(i, `SELECT count(*) FROM webhook_deliveries WHERE provider = $1`, cellProvider(i)))
			jobs := rivertest.RequireManyInserted(t.Context(), t, riverpgxv5.New(s.pools[i]), testfactory.DeliveryJobs(5, nil))
			for _, j := range jobs {
				var a claim.DeliveryArgs
				require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
				require.Equal(t, cellProvider(i), a.Provider, "delivery jobs in cell %s", cellName(i))
			}
		}
		w := s.worker()
		for i := range 2 {
			for n := range 5 {
				s.waitDelivered(i, fmt.Sprintf("evt_place_%d", n), cellSettle)
			}
		}
		// A cell's figures carry its name; a route's are in its cell only.
		metrics := getBody(t, w.url+"/metrics")
		for _, want := range []string{
			`hookgate_claims_processing{cell="c0"} 0`,
			`hookgate_claims_processing{cell="c1"} 0`,
			`hookgate_route_breaker_open{cell="c1",route="r1"} 0`,
			`hookgate_delivery_queue_oldest_age_seconds{cell="c0"} 0`,
			`hookgate_retention_deleted_total{cell="c1"} 0`,
		} {
			require.Contains(t, metrics, want)
		}
		require.NotContains(t, metrics, `hookgate_route_breaker_open{cell="c0",route="r1"}`)
		w.stop()
	})

	t.Run("route commands reach the route's cell", func(t *testing.T) {
		out, code := s.run("routes", "pause", cellRoute(1))
		require.Equal(t, 0, code, out)
		require.Equal(t, 1, s.count(1, `SELECT count(*) FROM audit_log`), "the pause is audited in the route's cell")
		require.Zero(t, s.count(0, `SELECT count(*) FROM audit_log`))
		out, code = s.run("routes", "list", "--json")
		require.Equal(t, 0, code, out)
		paused := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v struct {
				Route      string `json:"route"`
				Paused     bool   `json:"paused"`
				Processing int    `json:"processing"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &v), line)
			paused[v.Route] = v.Paused
		}
		require.Equal(t, map[string]bool{cellRoute(0): false, cellRoute(1): true}, paused, "each route's state read in its cell")
		out, code = s.run("routes", "resume", cellRoute(1))
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "resumed route "+cellRoute(1))
	})

	t.Run("a worker of one cell killed mid-attempt, the other cell delivers", func(t *testing.T) { killOneCellsWorker(t, s, in1, in2) })
}

// killOneCellsWorker kills the worker of cell c1 (SIGKILL) while its
// attempt is in flight, requires cell c0 to go on delivering, and then a
// new worker of c1 to deliver the attempt, once.
func killOneCellsWorker(t *testing.T, s *cellStack, in1, in2 *proc) {
	w0, w1 := s.workerFor(cellName(0)), s.workerFor(cellName(1))
	inFlight := make(chan struct{})
	var once sync.Once
	s.down.set(cellRoute(1), func(c *call, n int, _ http.ResponseWriter) int {
		if n == 1 {
			once.Do(func() { close(inFlight) })
			<-c.ctx.Done() // until the killed worker's connection drops
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	require.Equal(t, http.StatusOK, postCell(http.DefaultClient, in1.url, 1, "evt_killed"))
	select {
	case <-inFlight:
	case <-time.After(cellSettle):
		t.Fatal("the attempt of cell c1 never reached the downstream")
	}
	w1.kill()

	for n := range 5 {
		id := fmt.Sprintf("evt_meanwhile_%d", n)
		require.Equal(t, http.StatusOK, postCell(http.DefaultClient, in2.url, 0, id))
		s.waitDelivered(0, id, cellSettle)
	}
	require.Zero(t, s.down.effectsOf(cellKey(1, "evt_killed")), "cell c1 has no worker")

	// As TestWorkerKilledAfterTheSideEffect: once the job has run for
	// longer than rescue_after, end the dead worker's term as leader of
	// cell c1 rather than wait it out, so that the new one rescues it.
	require.Eventually(t, func() bool {
		jobs, err := testfactory.ListJobs(t.Context(), s.pools[1], testfactory.JobWhere{
			Delivery: claim.Key{Provider: cellProvider(1), EventID: "evt_killed"}, State: rivertype.JobStateRunning})
		return err == nil && len(jobs) == 1 && jobs[0].AttemptedAt != nil && time.Since(*jobs[0].AttemptedAt) > 5*time.Second
	}, cellSettle, 50*time.Millisecond)
	testfactory.ExpireLeader(t.Context(), t, s.pools[1])
	s.workerFor(cellName(1))
	s.waitDelivered(1, "evt_killed", 90*time.Second)
	require.GreaterOrEqual(t, len(s.down.callsFor(cellKey(1, "evt_killed"))), 2, "the killed attempt was taken up again")
	require.Zero(t, s.count(0, `SELECT count(*) FROM webhook_event_claims WHERE event_id = 'evt_killed'`), "nothing of cell c1 in cell c0")
	require.False(t, w0.exited())
}

// getBody returns the body of a GET of url.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// readyCells reads ingest's /readyz: its status and each cell's
// reachability.
func readyCells(t *testing.T, url string) (int, map[string]bool) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Cells []struct {
			Name      string `json:"name"`
			Reachable bool   `json:"reachable"`
		} `json:"cells"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	out := map[string]bool{}
	for _, c := range body.Cells {
		out[c.Name] = c.Reachable
	}
	return resp.StatusCode, out
}

// TestCellsThreeOneDown stops the primary of one of three cells under
// steady senders to all three providers: that cell's provider is answered
// 503 and the two others 200 and delivered, as if nothing happened;
// ingest's /readyz stays 200 and names the cell that is down, the worker's
// stays 200; an ingest and a worker started during the outage serve the
// other cells; and once the cell is back, every event acknowledged is
// claimed in its cell and delivered.
func TestCellsThreeOneDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCellStack(t, 3)
	in, w := s.ingest(), s.worker()

	loads := make([]*cellLoad, 3)
	for i := range 3 {
		loads[i] = startCellLoad(t, in.url, i, "evt_"+cellName(i))
	}
	waitAcked := func(i, n int) {
		t.Helper()
		require.Eventually(t, func() bool { acked, _ := loads[i].snapshot(); return len(acked) >= n },
			cellSettle, 10*time.Millisecond, "provider %s acknowledged %d events", cellProvider(i), n)
	}
	for i := range 3 {
		waitAcked(i, 5)
	}

	require.NoError(t, s.clusters[1].Stop(ctx))
	require.Eventually(t, func() bool { _, st := loads[1].snapshot(); return st[http.StatusServiceUnavailable] > 0 },
		cellSettle, 10*time.Millisecond, "the stopped cell's provider hears 503")
	code, cells := readyCells(t, in.url)
	require.Equal(t, http.StatusOK, code, "ready while a cell is reachable")
	require.Equal(t, map[string]bool{"c0": true, "c1": false, "c2": true}, cells)
	require.Equal(t, http.StatusOK, status(w.url+"/readyz"), "the worker too is ready while a cell it serves is reachable")

	// The other cells go on being acknowledged and delivered.
	for _, i := range []int{0, 2} {
		acked, _ := loads[i].snapshot()
		waitAcked(i, len(acked)+20)
		acked, _ = loads[i].snapshot()
		s.waitDelivered(i, acked[len(acked)-1], cellSettle)
	}
	// A replica started now serves the cells that answer.
	in2, w2 := s.ingest(), s.worker()
	require.Equal(t, http.StatusOK, postCell(http.DefaultClient, in2.url, 2, "evt_fresh"))
	require.Equal(t, http.StatusServiceUnavailable, postCell(http.DefaultClient, in2.url, 1, "evt_fresh"))
	s.waitDelivered(2, "evt_fresh", cellSettle)

	require.NoError(t, s.clusters[1].Restart(ctx))
	acked, _ := loads[1].snapshot()
	waitAcked(1, len(acked)+10)

	for i := range 3 {
		acked := loads[i].stop()
		_, statuses := loads[i].snapshot()
		if i != 1 {
			require.Equal(t, map[int]int{http.StatusOK: len(acked)}, statuses, "provider %s was never refused", cellProvider(i))
		}
		for _, id := range acked {
			s.waitDelivered(i, id, cellSettle)
		}
		t.Logf("provider %s: %d events acknowledged, answers %v", cellProvider(i), len(acked), statuses)
	}
	require.False(t, w2.exited(), "the worker started during the outage is still running")
	// It retries the cell every second: wait for its next try rather
	// than expect it to have come before the old replica delivered.
	require.Eventually(t, func() bool { return strings.Contains(w2.out.String(), "cell reachable: its job client started") },
		cellSettle, 50*time.Millisecond, "and works the cell that came back")
}
