package e2e_test

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// pacedRoute is a route named paced with rate (the YAML of its value) and
// more YAML keys in extra.
func pacedRoute(rate, extra string) route {
	return route{name: "paced", events: []string{"order.paid"}, extra: "    rate: " + rate + "\n" + extra}
}

// sendPaced claims n events for the paced route.
func (s *stack) sendPaced(ingest *proc, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_paced_%02d", i)
		s.claimed(ingest, event{id: ids[i], typ: "order.paid"})
	}
	return ids
}

// callsTo returns the calls route got, in the order they arrived.
func (d *downstream) callsTo(route string) []*call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*call
	for _, c := range d.calls {
		if c.route == route {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// jitter is how much the time a request takes to reach the downstream
// may vary between two requests of a test. The rate bounds the tokens the
// workers take over any window of per (TestRateTakeConcurrent checks that
// at the database's clock), and a request leaves within moments of its
// token; at the downstream, a request that took longer than the next one
// can land both in one window. So the tests count their windows over per
// less this, under the one-token interval of every rate they use.
const jitter = 40 * time.Millisecond

// busiestWindow returns the most calls that arrived within any window of
// per less jitter (a half-open interval that starts at a call), and where
// it starts.
func busiestWindow(calls []*call, per time.Duration) (int, time.Time) {
	per -= jitter
	most, at := 0, time.Time{}
	for i, c := range calls {
		n := 0
		for _, o := range calls[i:] {
			if !o.at.Before(c.at.Add(per)) {
				break
			}
			n++
		}
		if n > most {
			most, at = n, c.at
		}
	}
	return most, at
}

// requireDeliveredOnFirstAttempt waits for every event to complete and
// checks that each one's delivery was sent once, as attempt 1: waiting for
// the rate spent nothing.
func (s *stack) requireDeliveredOnFirstAttempt(ids []string, timeout time.Duration) {
	s.t.Helper()
	for _, id := range ids {
		s.waitStatus(id, claim.Completed, timeout)
		require.Equal(s.t, []string{"1"}, s.down.attempts(key(id, "paced")), id)
	}
}

// TestRatePacesWorkers: two, then three workers share one rate of 5
// requests a second (burst 2) over a backlog of 30 due events. No window of
// a second (less jitter) sees more than limit + burst requests at the
// downstream, every request is attempt 1, and the backlog runs at no less
// than 0.9 of the limit: the 30 requests span at most 30/(0.9 × 5) s from
// first to last. With the burst, the rate itself takes 5.4 s (27 refills at
// 200 ms), so the bound leaves 1.2 s for a loaded two-core machine
// (fetches, snoozes, process start).
func TestRatePacesWorkers(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprintf("%dWorkers", workers), func(t *testing.T) {
			t.Parallel()
			const limit, burst, events = 5, 2, 30
			s := newStack(t, []route{pacedRoute(fmt.Sprintf("{limit: %d, per: 1s, burst: %d}", limit, burst), "")})
			ingest := s.ingest()
			ids := s.sendPaced(ingest, events)
			for range workers {
				s.worker()
			}
			s.requireDeliveredOnFirstAttempt(ids, time.Minute)

			calls := s.down.callsTo("paced")
			require.Len(t, calls, events)
			most, at := busiestWindow(calls, time.Second)
			require.LessOrEqual(t, most, limit+burst, "requests in the second from %s", at.Format(time.StampMilli))
			span := calls[len(calls)-1].at.Sub(calls[0].at)
			require.LessOrEqual(t, span.Seconds(), events/(0.9*limit), "30 requests at no less than 0.9 of the limit")
			t.Logf("30 requests in %s; busiest second %d", span, most)
		})
	}
}

// TestRateRetryAfterHoldsEveryReplica: two workers share a paced route's
// backlog; its sixth request is answered 429 with Retry-After: 2 on one of
// them. Neither sends anything until the hold ends: no request reaches the
// route for the two seconds (less what was already in flight, and the
// hold's own write), though both workers hold jobs. The 429'd delivery's
// attempt counted (it is sent again as attempt 2); every other delivery is
// sent once, as attempt 1.
func TestRateRetryAfterHoldsEveryReplica(t *testing.T) {
	t.Parallel()
	// backoff.max above the Retry-After, which caps a route's hold as it
	// caps the delivery's retry.
	r := pacedRoute("{limit: 10, per: 1s}", "")
	r.max = 10 * time.Second
	s := newStack(t, []route{r})
	var n atomic.Int32
	var mu sync.Mutex
	var at429 time.Time
	var key429 string
	s.down.set("paced", func(c *call, _ int, w http.ResponseWriter) int {
		if n.Add(1) == 6 {
			mu.Lock()
			at429, key429 = c.at, c.key
			mu.Unlock()
			w.Header().Set("Retry-After", "2")
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	ingest := s.ingest()
	a, b := s.worker(), s.worker()
	ids := s.sendPaced(ingest, 30)

	for _, id := range ids {
		s.waitStatus(id, claim.Completed, time.Minute)
	}
	calls := s.down.callsTo("paced")
	mu.Lock()
	k429 := key429
	mu.Unlock()
	require.Equal(t, []string{"1", "2"}, s.down.attempts(k429), "the 429'd attempt counts")
	for _, id := range ids {
		if k := key(id, "paced"); k != k429 {
			require.Equal(t, []string{"1"}, s.down.attempts(k), id)
		}
	}
	mu.Lock()
	from, until := at429.Add(250*time.Millisecond), at429.Add(1900*time.Millisecond)
	mu.Unlock()
	for _, c := range calls {
		require.False(t, c.at.After(from) && c.at.Before(until), "a request %s after the 429", c.at.Sub(at429))
	}
	for _, p := range []*proc{a, b} {
		require.Greater(t, metric(t, p, "hookgate_deliveries_total", `outcome="held",route="paced"`), 0.0, "%s held jobs", p.name)
	}
	require.Greater(t, metric(t, b, "hookgate_route_rate_wait_seconds_sum", `route="paced"`), 0.0)
}

// TestRateKilledWorkerLosesAtMostItsLease SIGKILLs one of two workers in
// the middle of a paced backlog (20 a second, burst 4: leases of 2 tokens).
// The tokens it took die with it, at most one lease; the route's row is
// not left locked nor reserved, so the other worker goes on at the rate:
// from the kill to its last request, it is sent no less than 0.9 of the
// limit, less that lease. The killed worker's deliveries in flight are
// River's to rescue later, as any crashed attempt.
func TestRateKilledWorkerLosesAtMostItsLease(t *testing.T) {
	t.Parallel()
	const limit, lease, events = 20, 2, 80
	s := newStack(t, []route{pacedRoute(fmt.Sprintf("{limit: %d, per: 1s, burst: 4}", limit), "")})
	ingest := s.ingest()
	s.sendPaced(ingest, events)
	a := s.worker()
	s.worker()
	require.Eventually(t, func() bool { return len(s.down.callsTo("paced")) >= 20 }, settle, 5*time.Millisecond)
	a.kill()
	killed := time.Now()

	// The survivor sends the rest of the backlog but for the killed
	// worker's jobs, which wait for River's rescuer.
	require.Eventually(t, func() bool {
		calls := s.down.callsTo("paced")
		return len(calls) >= events-2*limit || time.Since(calls[len(calls)-1].at) > time.Second
	}, settle, 20*time.Millisecond)
	var after []*call
	for _, c := range s.down.callsTo("paced") {
		if c.at.After(killed) && c.attempt == "1" {
			after = append(after, c)
		}
	}
	require.NotEmpty(t, after)
	span := after[len(after)-1].at.Sub(killed)
	want := 0.9*limit*span.Seconds() - lease
	require.GreaterOrEqual(t, float64(len(after)), want, "%d requests in the %s after the kill", len(after), span)
	most, at := busiestWindow(s.down.callsTo("paced"), time.Second)
	require.LessOrEqual(t, most, limit+4, "requests in the second from %s", at.Format(time.StampMilli))
}

// TestRateWithBreaker: a paced route (2 a second) whose downstream is down
// opens its circuit after 3 failures. The open circuit holds the route's
// deliveries (they count as held, with no attempt spent), and its probes,
// due every 300 ms, still wait for the rate: no second of the whole run
// sees more than 2 requests. Once the downstream is back, everything is
// delivered, each attempt number once.
func TestRateWithBreaker(t *testing.T) {
	t.Parallel()
	r := pacedRoute("{limit: 2, per: 1s}", "    breaker: {failures: 3, cool_down: 300ms, max_cool_down: 300ms}\n")
	r.maxAttempts = 10
	s := newStack(t, []route{r})
	o := newOutage(s, "paced")
	ingest := s.ingest()
	ids := s.sendPaced(ingest, 8)
	s.worker()
	s.worker()

	require.Eventually(t, func() bool { return s.breakerOf("paced").State != claim.BreakerClosed }, settle, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		held, err := s.store.RouteHeld(t.Context(), []string{"paced"})
		require.NoError(t, err)
		return held["paced"] > 0
	}, settle, 20*time.Millisecond, "the open circuit holds deliveries")
	out, code := s.run("routes", "list")
	require.Zero(t, code, out)
	require.Regexp(t, `(?m)^paced\s.*\s2/1s\s`, out)
	require.Eventually(t, func() bool { return s.audited(claim.ActionBreakerHalfOpen, "paced") >= 2 }, settle, 20*time.Millisecond)
	o.recover()

	for _, id := range ids {
		s.waitStatus(id, claim.Completed, time.Minute)
		seen := map[string]bool{}
		for _, a := range s.down.attempts(key(id, "paced")) {
			require.False(t, seen[a], "%s: attempt %s sent twice", id, a)
			seen[a] = true
			n, err := strconv.Atoi(a)
			require.NoError(t, err)
			require.LessOrEqual(t, n, 10, id)
		}
	}
	most, at := busiestWindow(s.down.callsTo("paced"), time.Second)
	require.LessOrEqual(t, most, 2, "requests in the second from %s, probes included", at.Format(time.StampMilli))
	require.Equal(t, claim.BreakerClosed, s.breakerOf("paced").State)
}

// TestRetryAfterHoldsAnUnpacedRoute: a Retry-After holds a route without a
// rate too, on both workers: each reads the holds at most a second old,
// so from a second after the 429 until the hold ends, no request reaches
// the route; then every delivery is sent, the held ones as attempt 1.
func TestRetryAfterHoldsAnUnpacedRoute(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "paced", events: []string{"order.paid"}, concurrency: 1, max: 10 * time.Second}})
	var n atomic.Int32
	var mu sync.Mutex
	var at429 time.Time
	s.down.set("paced", func(c *call, _ int, w http.ResponseWriter) int {
		if n.Add(1) == 3 {
			mu.Lock()
			at429 = c.at
			mu.Unlock()
			w.Header().Set("Retry-After", "3")
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	ingest := s.ingest()
	a, b := s.worker(), s.worker()
	ids := s.sendPaced(ingest, 12)
	for _, id := range ids {
		s.waitStatus(id, claim.Completed, time.Minute)
	}
	mu.Lock()
	from, until := at429.Add(1200*time.Millisecond), at429.Add(2900*time.Millisecond)
	mu.Unlock()
	var held string
	for _, c := range s.down.callsTo("paced") {
		require.False(t, c.at.After(from) && c.at.Before(until), "a request %s after the 429", c.at.Sub(at429))
		if c.at.After(at429) && c.attempt == "2" {
			held = c.key
		}
	}
	for _, id := range ids {
		if k := key(id, "paced"); k != held {
			require.Equal(t, []string{"1"}, s.down.attempts(k), id)
		}
	}
	require.Greater(t, metric(t, a, "hookgate_deliveries_total", `outcome="held",route="paced"`)+
		metric(t, b, "hookgate_deliveries_total", `outcome="held",route="paced"`), 0.0)
}
