package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// outage is a downstream route that answers 503 until recovered, counting
// the requests it got while down; with hang, it holds each request open
// instead, until the caller goes away.
type outage struct {
	down, hang atomic.Bool
	mu         sync.Mutex
	during     int
	start      time.Time
}

func newOutage(s *stack, route string) *outage {
	o := &outage{start: time.Now()}
	o.down.Store(true)
	s.down.set(route, func(c *call, _ int, _ http.ResponseWriter) int {
		if !o.down.Load() {
			return http.StatusOK
		}
		o.mu.Lock()
		o.during++
		o.mu.Unlock()
		if o.hang.Load() {
			<-c.ctx.Done()
		}
		return http.StatusServiceUnavailable
	})
	return o
}

func (o *outage) requests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.during
}

// recover ends the outage and returns how long it lasted and how many
// requests it got.
func (o *outage) recover() (time.Duration, int) {
	o.down.Store(false)
	return time.Since(o.start), o.requests()
}

// breakerOf reads route's breaker from the database.
func (s *stack) breakerOf(route string) claim.Breaker {
	s.t.Helper()
	bs, err := s.store.Breakers(context.Background(), []string{route})
	require.NoError(s.t, err)
	return bs[route]
}

// audited counts the audit rows of action on route.
func (s *stack) audited(action, route string) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE actor = 'breaker' AND action = $1 AND target = $2`, action, route).Scan(&n))
	return n
}

// metric returns the value of the series of name with labels (as written
// in the exposition, e.g. `route="down"`) on p's /metrics; -1 when absent.
func metric(t *testing.T, p *proc, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, name+"{"+labels+"} "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			require.NoError(t, err)
			return v
		}
	}
	return -1
}

// breakerRoute is the route of the breaker tests: 3 attempts, a breaker
// that opens after 5 failures and probes after 1s, then 2s.
func breakerRoute(concurrency int) route {
	return route{name: "down", events: []string{"order.paid"}, maxAttempts: 3, initial: 200 * time.Millisecond,
		concurrency: concurrency, extra: "    breaker: {failures: 5, cool_down: 1s, max_cool_down: 2s}\n"}
}

const outageEvents = 20

// sendOutage claims outageEvents events for the down route.
func (s *stack) sendOutage(ingest *proc) []string {
	ids := make([]string, outageEvents)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_outage_%02d", i)
		s.claimed(ingest, event{id: ids[i], typ: "order.paid"})
	}
	return ids
}

// requireAllDeliveredOnce waits for every event to complete, and checks
// that none failed, each had its effect once, and no attempt number was
// sent twice or past max_attempts.
func (s *stack) requireAllDeliveredOnce(ids []string, timeout time.Duration) {
	t := s.t
	t.Helper()
	for _, id := range ids {
		_, ds := s.waitStatus(id, claim.Completed, timeout)
		d := deliveryOf(t, ds, "down")
		require.LessOrEqual(t, d.AttemptCount, 3, id)
		k := key(id, "down")
		require.Equal(t, 1, s.down.effectsOf(k), id)
		seen := map[string]bool{}
		for _, a := range s.down.attempts(k) {
			n, err := strconv.Atoi(a)
			require.NoError(t, err)
			require.True(t, n >= 1 && n <= 3, "%s: attempt %d of 3", id, n)
			require.False(t, seen[a], "%s: attempt %s sent twice", id, a)
			seen[a] = true
		}
	}
}

// TestBreakerOutage: 20 events meet a downstream answering 503. The
// circuit opens after 5 failures and lets one probe through per cool-down,
// none of the deliveries fails although each has only 3 attempts, and all
// are delivered once the downstream is back. The state shows in `worker
// routes list`, the metric and the audit.
func TestBreakerOutage(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{breakerRoute(1)})
	o := newOutage(s, "down")
	ingest, worker := s.ingest(), s.worker()
	ids := s.sendOutage(ingest)

	require.Eventually(t, func() bool { return s.breakerOf("down").State != claim.BreakerClosed }, settle, 20*time.Millisecond)
	require.Eventually(t, func() bool { return metric(t, worker, "hookgate_route_breaker_open", `route="down"`) == 1 }, settle, 50*time.Millisecond)
	out, code := s.run("routes", "list")
	require.Zero(t, code, out)
	require.Regexp(t, `(?m)^down\s.*\s(open|half_open)\b`, out)
	// Keep the outage through two failed probes.
	require.Eventually(t, func() bool { return s.audited(claim.ActionBreakerHalfOpen, "down") >= 2 }, settle, 50*time.Millisecond)
	lasted, requests := o.recover()

	// failures, then one probe per cool-down at most.
	probes := int(lasted/time.Second) + 1
	require.LessOrEqual(t, requests, 5+probes, "requests during the outage")
	// The failures and the first probe at least; the second probe's
	// request may come after the recovery (it is granted before it is sent).
	require.GreaterOrEqual(t, requests, 5+1)
	s.requireAllDeliveredOnce(ids, settle)
	require.Equal(t, claim.BreakerClosed, s.breakerOf("down").State)
	require.Equal(t, 1, s.audited(claim.ActionBreakerClose, "down"))
	require.GreaterOrEqual(t, s.audited(claim.ActionBreakerOpen, "down"), 2, "opened, then again after the failed first probe")
	require.Greater(t, metric(t, worker, "hookgate_deliveries_total", `outcome="held",route="down"`), 0.0)
	require.Eventually(t, func() bool { return metric(t, worker, "hookgate_route_breaker_open", `route="down"`) == 0 }, settle, 50*time.Millisecond)
}

// TestBreakerSharedByReplicas runs the outage with two workers: they share
// one breaker, so the requests during the outage stay within the failures,
// the attempt the other replica had in flight, and one probe per cool-down,
// and both hold jobs back.
func TestBreakerSharedByReplicas(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{breakerRoute(1)})
	o := newOutage(s, "down")
	ingest := s.ingest()
	a, b := s.worker(), s.worker()
	ids := s.sendOutage(ingest)

	require.Eventually(t, func() bool { return s.audited(claim.ActionBreakerHalfOpen, "down") >= 2 }, settle, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		return metric(t, a, "hookgate_deliveries_total", `outcome="held",route="down"`) > 0 &&
			metric(t, b, "hookgate_deliveries_total", `outcome="held",route="down"`) > 0
	}, settle, 50*time.Millisecond, "both replicas hold jobs back")
	lasted, requests := o.recover()
	probes := int(lasted/time.Second) + 1
	require.LessOrEqual(t, requests, 5+1+probes, "requests during the outage")
	s.requireAllDeliveredOnce(ids, settle)
	require.Equal(t, 1, s.audited(claim.ActionBreakerClose, "down"))
}

// TestBreakerOutlivesAKilledWorker SIGKILLs a worker while the circuit is
// open, and its successor while it holds the probe (the downstream holds
// the request open): the state is in Postgres and the probe's lease
// expires, so a third worker probes, closes the circuit and delivers
// every event once the downstream is back.
func TestBreakerOutlivesAKilledWorker(t *testing.T) {
	t.Parallel()
	r := breakerRoute(1)
	r.timeout = 5 * time.Second // the held probe outlasts the poll that sees it, under load too
	s := newStack(t, []route{r}, setting{"rescue_after", "8s"})
	o := newOutage(s, "down")
	ingest, first := s.ingest(), s.worker()
	ids := s.sendOutage(ingest)
	require.Eventually(t, func() bool { return s.breakerOf("down").State == claim.BreakerOpen }, settle, 20*time.Millisecond)
	o.hang.Store(true)
	first.kill()

	second := s.worker()
	require.Eventually(t, func() bool { return s.breakerOf("down").State == claim.BreakerHalfOpen }, settle, 20*time.Millisecond)
	second.kill()
	require.Equal(t, claim.BreakerHalfOpen, s.breakerOf("down").State, "the probe's lease outlives its worker")

	o.hang.Store(false)
	o.recover()
	s.worker()
	s.requireAllDeliveredOnce(ids, 2*time.Minute)
	require.Equal(t, claim.BreakerClosed, s.breakerOf("down").State)
}

// TestBreakerAlternatingNeverOpens: a downstream that strictly alternates
// 200 and 503, at route concurrency 4 with two workers, never makes three
// consecutive failures, so its `failures: 3` circuit never opens however
// the breaker writes of the attempts and replicas interleave (the count
// follows the order the answers came in).
func TestBreakerAlternatingNeverOpens(t *testing.T) {
	t.Parallel()
	r := route{name: "flaky", events: []string{"order.paid"}, maxAttempts: 20, initial: 20 * time.Millisecond,
		max: 100 * time.Millisecond, concurrency: 4, timeout: 10 * time.Second, extra: "    breaker: {failures: 3, cool_down: 1m}\n"}
	s := newStack(t, []route{r})
	// Answers alternate in the order the workers get them: one at a time,
	// a moment apart, so that no two arrive at once (two answers that do
	// have no order a worker could see).
	const gap = 50 * time.Millisecond
	var mu sync.Mutex
	answers := 0
	var last time.Time
	s.down.set("flaky", func(*call, int, http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(time.Until(last.Add(gap)))
		last = time.Now()
		answers++
		if answers%2 == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ingest := s.ingest()
	s.worker()
	s.worker()
	const events = 40
	for i := range events {
		s.claimed(ingest, event{id: fmt.Sprintf("evt_flaky_%02d", i), typ: "order.paid"})
	}
	for i := range events {
		s.waitStatus(fmt.Sprintf("evt_flaky_%02d", i), claim.Completed, settle)
	}
	mu.Lock()
	require.GreaterOrEqual(t, answers, 2*events-1, "every event met a failure or two")
	mu.Unlock()
	require.Zero(t, s.audited(claim.ActionBreakerOpen, "flaky"), "the circuit never opened")
	require.Equal(t, claim.BreakerClosed, s.breakerOf("flaky").State)
}
