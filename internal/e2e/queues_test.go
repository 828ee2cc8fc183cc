package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// burst sends n events, ids prefix_00.., all at once, and requires that
// each won its claim.
func (s *stack) burst(ingest *proc, prefix string, n int) []event {
	s.t.Helper()
	events := make([]event, n)
	acks := make([]ack, n)
	var wg sync.WaitGroup
	for i := range events {
		events[i] = event{id: fmt.Sprintf("%s_%02d", prefix, i), typ: "order.paid"}
		wg.Go(func() { acks[i] = s.send(ingest, events[i], providerSecret) })
	}
	wg.Wait()
	for i, a := range acks {
		require.Equal(s.t, ack{status: http.StatusOK}, a, "sending %s", events[i].id)
	}
	return events
}

// waitDeliveries polls until n deliveries of route whose event ids start
// with prefix have status want.
func (s *stack) waitDeliveries(route, prefix string, want claim.DeliveryStatus, n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var got int
		require.NoError(s.t, s.db.Pool.QueryRow(s.t.Context(), `SELECT count(*) FROM webhook_deliveries
WHERE route = $1 AND starts_with(event_id, $2) AND status = $3`, route, prefix, want).Scan(&got))
		if got == n {
			return
		}
		require.True(s.t, time.Now().Before(deadline), "%d of %d %s deliveries to %s are %s", got, n, prefix, route, want)
		time.Sleep(25 * time.Millisecond)
	}
}

// waitLog polls until p's output contains every one of want.
func waitLog(t *testing.T, p *proc, timeout time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, all := p.out.String(), true
		for _, w := range want {
			all = all && strings.Contains(out, w)
		}
		if all {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never logged %q:\n%s", p.name, want, out)
		time.Sleep(25 * time.Millisecond)
	}
}

// peakGauge counts a route's requests in flight at the downstream and
// remembers the most seen at once.
type peakGauge struct{ now, peak atomic.Int32 }

// hold is a downstream behaviour that keeps each request in flight for d.
func (g *peakGauge) hold(d time.Duration) behaviour {
	return func(c *call, _ int, _ http.ResponseWriter) int {
		n := g.now.Add(1)
		defer g.now.Add(-1)
		for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
		}
		select {
		case <-time.After(d):
		case <-c.ctx.Done():
		}
		return http.StatusOK
	}
}

// TestRouteConcurrency sends bursts of 50 events to a route with
// concurrency 2 whose downstream holds each request 50ms. The route's
// River queue has more slots than that (deliver.Queues: four per call),
// and the worker's call tokens bound the calls per process, so one worker
// has exactly 2 requests in flight at most, and two workers at most 2 each.
func TestRouteConcurrency(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "limited", events: []string{"*"}, concurrency: 2}}, setting{"concurrency", "8"})
	var g peakGauge
	s.down.set("limited", g.hold(50*time.Millisecond))
	ingest, first := s.ingest(), s.worker()

	t.Run("OneWorker", func(t *testing.T) {
		events := s.burst(ingest, "evt_one", 50)
		s.waitDeliveries("limited", "evt_one", claim.DeliveryCompleted, 50, 60*time.Second)
		require.EqualValues(t, 2, g.peak.Load(), "at most the route's concurrency in flight, and that many used")
		for _, e := range events {
			require.Len(t, s.down.callsFor(key(e.id, "limited")), 1, "%s delivered once", e.id)
		}
	})

	t.Run("TwoWorkers", func(t *testing.T) {
		second := s.worker()
		g.peak.Store(0)
		events := s.burst(ingest, "evt_two", 50)
		s.waitDeliveries("limited", "evt_two", claim.DeliveryCompleted, 50, 60*time.Second)
		t.Logf("at most %d requests in flight with two workers", g.peak.Load())
		require.LessOrEqual(t, g.peak.Load(), int32(2*2), "the route's concurrency per worker process")
		for _, e := range events {
			require.Len(t, s.down.callsFor(key(e.id, "limited")), 1, "%s delivered once", e.id)
		}
		require.Contains(t, second.out.String(), "msg=delivered", "the second worker took part")
		require.False(t, first.exited())
	})
}

// routeListed is a line of `worker routes list --json`.
type routeListed struct {
	Route      string `json:"route"`
	Queue      string `json:"queue"`
	Processing int    `json:"processing"`
	Failed     int    `json:"failed"`
	Backlog    int    `json:"backlog"`
	Available  int    `json:"available"`
	Running    int    `json:"running"`
	Paused     bool   `json:"paused"`
}

func (s *stack) routesList() map[string]routeListed {
	s.t.Helper()
	out, code := s.run("routes", "list", "--json")
	require.Zero(s.t, code, out)
	routes := map[string]routeListed{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r routeListed
		require.NoError(s.t, json.Unmarshal([]byte(line), &r), out)
		routes[r.Route] = r
	}
	return routes
}

// TestRoutePause pauses one of two routes that take the same events while
// two workers run: the events are accepted and the other route gets them,
// the paused one gets nothing and keeps its backlog with no attempt
// counted; once resumed, every held delivery arrives once, as attempt 1.
func TestRoutePause(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "held", events: []string{"*"}}, {name: "live", events: []string{"*"}}})
	const password = "pause test ui password"
	s.env = append(s.env, "HOOKGATE_UI_PASSWORD="+password)
	ingest, workers := s.ingest(), []*proc{s.worker(), s.worker()}

	out, code := s.run("routes", "pause", "held")
	require.Zero(t, code, out)
	require.Contains(t, out, "paused route held (queue route-held)")
	for _, w := range workers {
		waitLog(t, w, settle, `msg="route paused: no new attempts until it is resumed" queue=route-held route=held`)
	}

	events := s.burst(ingest, "evt_paused", 20)
	s.waitDeliveries("live", "evt_paused", claim.DeliveryCompleted, 20, settle)
	for _, e := range events {
		require.Empty(t, s.down.callsFor(key(e.id, "held")), "nothing reaches a paused route")
		_, ds := s.waitStatus(e.id, claim.Processing, settle)
		require.Zero(t, deliveryOf(t, ds, "held").AttemptCount, "no attempt counted")
	}
	var waiting, attempted int
	for _, e := range events {
		for _, j := range testfactory.Jobs(t.Context(), t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: e.id, Route: "held"}}) {
			if j.State == rivertype.JobStateAvailable && j.Queue == "route-held" {
				waiting++
			}
			if j.Attempt > 0 {
				attempted++
			}
		}
	}
	require.Equal(t, 20, waiting)
	require.Zero(t, attempted, "no job used an attempt")

	listed := s.routesList()
	require.Equal(t, routeListed{Route: "held", Queue: "route-held", Processing: 20, Backlog: 20, Available: 20, Paused: true}, listed["held"])
	require.Equal(t, routeListed{Route: "live", Queue: "route-live"}, listed["live"])
	// River's UI shows the queue paused.
	req, err := http.NewRequest(http.MethodGet, workers[0].url+"/riverui/api/queues/route-held", nil)
	require.NoError(t, err)
	req.SetBasicAuth("admin", password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var shown struct {
		Name     string     `json:"name"`
		PausedAt *time.Time `json:"paused_at"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&shown))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "route-held", shown.Name)
	require.NotNil(t, shown.PausedAt)

	out, code = s.run("routes", "list")
	require.Zero(t, code, out)
	require.Regexp(t, `(?m)^held\s+paused since \S+\s+closed\s+-\s+8\s+20\s+0\s+0\s+20\s+0\s+0\s+0\s+route-held\s+-$`, out)
	require.Regexp(t, `(?m)^live\s+active\s+closed\s+-\s+8\s+0\s+0\s+0\s+0\s+0\s+0\s+0\s+route-live\s+-$`, out)

	out, code = s.run("routes", "resume", "held")
	require.Zero(t, code, out)
	require.Contains(t, out, "resumed route held")
	for _, e := range events {
		_, ds := s.waitStatus(e.id, claim.Completed, settle)
		require.Equal(t, 1, deliveryOf(t, ds, "held").AttemptCount)
		k := key(e.id, "held")
		require.Equal(t, []string{"1"}, s.down.attempts(k), "%s arrived once, as its first attempt", e.id)
		require.Equal(t, 1, s.down.effectsOf(k))
	}
	for _, w := range workers {
		waitLog(t, w, settle, `msg="route resumed" queue=route-held route=held`)
	}
	require.Equal(t, routeListed{Route: "held", Queue: "route-held"}, s.routesList()["held"])

	out, code = s.run("routes", "pause", "hold")
	require.Equal(t, 1, code)
	require.Contains(t, out, `no route "hold" in the configuration (routes: held, live)`)
}

// TestRoutePausedBeforeAnyWorker pauses a route no worker has run yet:
// workers that start later start it paused.
func TestRoutePausedBeforeAnyWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "held", events: []string{"*"}}, {name: "live", events: []string{"*"}}})
	out, code := s.run("routes", "pause", "held")
	require.Zero(t, code, out)
	ingest := s.ingest()
	e := event{id: "evt_early_pause", typ: "order.paid"}
	s.claimed(ingest, e)

	w := s.worker()
	waitLog(t, w, settle, `msg="route paused: no new attempts until it is resumed" queue=route-held route=held`)
	s.waitDeliveries("live", e.id, claim.DeliveryCompleted, 1, settle)
	require.Empty(t, s.down.callsFor(key(e.id, "held")))
	require.True(t, s.routesList()["held"].Paused)

	out, code = s.run("routes", "resume", "held")
	require.Zero(t, code, out)
	s.waitStatus(e.id, claim.Completed, settle)
	require.Equal(t, []string{"1"}, s.down.attempts(key(e.id, "held")))
}

// TestJobsOnTheDefaultQueue covers jobs enqueued where a version without
// route queues put them: on River's default queue. A worker moves those
// waiting when it starts onto their route's queue, and still works the
// default queue, for jobs an older ingest enqueues there while versions mix.
func TestJobsOnTheDefaultQueue(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}})
	ingest := s.ingest()

	before := event{id: "evt_before_upgrade", typ: "order.paid"}
	s.claimed(ingest, before)
	testfactory.SetJobs(t.Context(), t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: before.id}},
		&testfactory.JobOpts{Queue: river.QueueDefault})

	w := s.worker()
	s.waitStatus(before.id, claim.Completed, settle)
	require.Equal(t, []string{"1"}, s.down.attempts(key(before.id, "ship")))
	// Moved to its route's queue at start (its row went with its end).
	require.Contains(t, w.out.String(), `msg="moved waiting delivery jobs to their routes' queues" jobs=1`)

	// An older ingest, still running beside this worker, enqueues on the
	// default queue (as a store that knows no route queues does).
	jobs, err := river.NewClient(riverpgxv5.New(s.db.Pool), &river.Config{})
	require.NoError(t, err)
	// Claimed in a transaction, its queue read before the commit: the
	// running worker cannot end the job (and delete its row) first.
	tx, err := s.db.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
	old := claim.NewStore(tx, jobs, func(string) int { return 0 })
	during := event{id: "evt_during_upgrade", typ: "order.paid"}
	_, err = testfactory.ClaimEvent(t.Context(), old, claim.Event{Provider: provider, ID: during.id, Type: during.typ,
		ContentType: "application/json", Payload: during.body()}, []string{"ship"}, true)
	require.NoError(t, err)
	// The one delivery job stored (before's row went with its end).
	rivertest.RequireInsertedTx[*riverpgxv5.Driver](t.Context(), t, tx, &claim.DeliveryArgs{}, &rivertest.RequireInsertedOpts{Queue: river.QueueDefault})
	require.NoError(t, tx.Commit(t.Context()))
	s.waitStatus(during.id, claim.Completed, settle)
	require.Equal(t, []string{"1"}, s.down.attempts(key(during.id, "ship")))
}

// TestJobsOfARemovedRoute removes a route from the configuration while a
// delivery to it waits on its queue, which no worker serves any more: the
// worker moves the job to the default queue at start and fails the
// delivery with the reason, so nothing waits forever.
func TestJobsOfARemovedRoute(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}, {name: "mail", events: []string{"*"}}})
	ingest := s.ingest()
	e := event{id: "evt_removed_route", typ: "order.paid"}
	s.claimed(ingest, e)

	b, err := os.ReadFile(s.cfgPath)
	require.NoError(t, err)
	cfg, mail, found := strings.Cut(string(b), "  - name: mail\n")
	require.True(t, found)
	if _, rest, ok := strings.Cut(mail, "\n  - "); ok {
		cfg += "  - " + rest
	}
	require.NoError(t, os.WriteFile(s.cfgPath, []byte(cfg), 0o600))

	s.worker()
	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "ship").Status)
	mailDelivery := deliveryOf(t, ds, "mail")
	require.Equal(t, claim.DeliveryFailed, mailDelivery.Status)
	require.Equal(t, `route "mail" is no longer configured`, mailDelivery.LastError)
	require.Empty(t, s.down.callsFor(key(e.id, "mail")))
}
