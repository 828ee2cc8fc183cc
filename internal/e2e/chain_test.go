package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/maintenance"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// deliveryWaiting is the contract's status of a delivery waiting for the
// routes it runs after; only the store's SQL writes it.
const deliveryWaiting = claim.DeliveryStatus("waiting")

// after is the YAML of a route's after: names.
func after(names ...string) string {
	return "    after: [" + strings.Join(names, ", ") + "]\n"
}

// routeJobs counts the River jobs of event id's delivery to route still
// stored: a delivery's end deletes its job's row.
func (s *stack) routeJobs(id, route string) int {
	s.t.Helper()
	return len(testfactory.Jobs(context.Background(), s.t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: id, Route: route}}))
}

// metric reads series (name and labels) from p's /metrics, as text.
func (s *stack) metric(p *proc, series string) string {
	s.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, p.url+"/metrics", nil)
	require.NoError(s.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	require.NoError(s.t, sc.Err())
	s.t.Fatalf("/metrics has no %s", series)
	return ""
}

// twoSteps is a chain: step2 runs after step1, for every event type.
func twoSteps() []route {
	return []route{
		{name: "step1", events: []string{"*"}},
		{name: "step2", events: []string{"*"}, extra: after("step1")},
	}
}

// TestChainOrder: step 2 is called only after step 1's 2xx, with step 1's
// result in its path and body, and an Idempotency-Key of its own.
func TestChainOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "step1", events: []string{"*"}, extra: "    result: '{id: .id}'\n"},
		{name: "step2", events: []string{"*"}, extra: after("step1") + `    method: PUT
    path: '[$results.step1.id, "label"]'
    body: '{shipment: $results.step1.id, order: .data.id}'
`},
	})
	s.down.reply("step1", `{"id":"shp/7 ü"}`)
	ingest := s.ingest()
	s.worker()
	e := event{id: "evt_chain_order", typ: "order.paid"}
	s.claimed(ingest, e)
	_, ds := s.waitStatus(e.id, claim.Completed, settle)
	require.JSONEq(t, `{"id":"shp/7 ü"}`, string(deliveryOf(t, ds, "step1").Result))
	require.Equal(t, []string{"step1"}, deliveryOf(t, ds, "step2").After)

	first, second := s.down.callsFor(key(e.id, "step1")), s.down.callsFor(key(e.id, "step2"))
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	require.False(t, second[0].at.Before(first[0].at), "step 2 only after step 1's 2xx")
	require.Equal(t, "/step2/shp%2F7%20%C3%BC/label", second[0].path, "step 1's result, one escaped segment")
	require.JSONEq(t, `{"shipment":"shp/7 ü","order":"obj_evt_chain_order"}`, string(second[0].body))
	require.NotEqual(t, first[0].key, second[0].key)
	require.Equal(t, key(e.id, "step2"), second[0].key)
}

// TestChainFanIn: a and b both before c. c runs once, after both, and sees
// both results.
func TestChainFanIn(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "a", events: []string{"*"}, extra: "    result: .\n"},
		{name: "b", events: []string{"*"}, extra: "    result: .\n"},
		{name: "c", events: []string{"*"}, extra: after("a", "b") + "    body: '$results'\n"},
	})
	s.down.reply("a", `{"from":"a"}`)
	s.down.reply("b", `{"from":"b"}`)
	// b answers late, so that a completes first and c must wait for b.
	s.down.set("b", answers(http.StatusServiceUnavailable, http.StatusOK))
	ingest := s.ingest()
	s.worker()
	e := event{id: "evt_chain_fan", typ: "order.paid"}
	s.claimed(ingest, e)
	s.waitStatus(e.id, claim.Completed, settle)
	a, b, c := s.down.callsFor(key(e.id, "a")), s.down.callsFor(key(e.id, "b")), s.down.callsFor(key(e.id, "c"))
	require.Len(t, a, 1)
	require.Len(t, b, 2)
	require.Len(t, c, 1, "c ran once")
	require.False(t, c[0].at.Before(a[0].at))
	require.False(t, c[0].at.Before(b[1].at), "c ran after b's 2xx")
	require.JSONEq(t, `{"a":{"from":"a"},"b":{"from":"b"}}`, string(c[0].body))
}

// TestChainFailedPredecessor: step 1 fails for good (400); step 2 stays
// waiting, with no job and no call, and the claim is failed. After
// `claims retry` and step 1's 201, step 2 runs exactly once, after it,
// under its own key.
func TestChainFailedPredecessor(t *testing.T) {
	t.Parallel()
	s := newStack(t, twoSteps())
	s.down.set("step1", answers(http.StatusBadRequest, http.StatusCreated))
	ingest, worker := s.ingest(), s.worker()
	e := event{id: "evt_chain_fail", typ: "order.paid"}
	s.claimed(ingest, e)

	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, deliveryWaiting, deliveryOf(t, ds, "step2").Status)
	require.Zero(t, s.routeJobs(e.id, "step2"), "a waiting delivery has no job")
	require.Empty(t, s.down.callsFor(key(e.id, "step2")))
	out, code := s.run("claims", "show", provider, e.id)
	require.Zero(t, code, out)
	require.Regexp(t, `(?m)^step2\s+waiting \(after step1\)\s`, out)
	out, code = s.run("routes", "list", "--json")
	require.Zero(t, code, out)
	require.Contains(t, out, `"route":"step2"`)
	require.Regexp(t, `"route":"step2","queue":"[^"]+","processing":0,"waiting":1,`, out)
	require.Equal(t, "1", s.metric(worker, `hookgate_deliveries_waiting{route="step2"}`))
	require.Equal(t, "0", s.metric(worker, `hookgate_deliveries_waiting{route="step1"}`))

	out, code = s.run("claims", "retry", provider, e.id)
	require.Zero(t, code, out)
	_, ds = s.waitStatus(e.id, claim.Completed, settle)
	require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "step2").Status)
	first, second := s.down.callsFor(key(e.id, "step1")), s.down.callsFor(key(e.id, "step2"))
	require.Len(t, first, 2, "step 1: the 400, then the retry's 201")
	require.Len(t, second, 1, "step 2 ran exactly once")
	require.NotEqual(t, first[0].key, second[0].key, "each step has its own Idempotency-Key")
	require.False(t, second[0].at.Before(first[1].at), "step 2 only after step 1's 2xx")
	require.Zero(t, s.routeJobs(e.id, "step2"), "step 2's job's row went with its end")
}

// TestChainCrashAtTheHandOver kills the worker between step 1's
// downstream 2xx and its end transaction. Step 1's rescued job retries
// with the same key (the downstream dedupes it), its completion releases
// step 2, and step 2 runs exactly once.
func TestChainCrashAtTheHandOver(t *testing.T) {
	t.Parallel()
	s := newStack(t, twoSteps(), setting{"rescue_after", "4s"})
	e := event{id: "evt_chain_crash", typ: "order.paid"}
	arrived, release := make(chan struct{}), make(chan struct{})
	s.down.set("step1", func(c *call, n int, _ http.ResponseWriter) int {
		if n == 1 {
			s.down.effect(c.key) // the effect happens, the answer is late
			close(arrived)
			select {
			case <-release:
			case <-c.ctx.Done():
			}
		}
		return http.StatusOK
	})
	ingest, first := s.ingest(), s.worker()
	s.claimed(ingest, e)
	select {
	case <-arrived:
	case <-time.After(settle):
		t.Fatal("step 1's first attempt never arrived")
	}
	first.kill()
	close(release)

	_, ds, err := s.store.Get(t.Context(), provider, e.id)
	require.NoError(t, err)
	require.Equal(t, deliveryWaiting, deliveryOf(t, ds, "step2").Status, "nothing recorded by the killed worker")
	require.Zero(t, s.routeJobs(e.id, "step2"))

	require.Eventually(t, func() bool {
		return s.runningSince(e.id, 4*time.Second)
	}, settle, 50*time.Millisecond)
	testfactory.ExpireLeader(t.Context(), t, s.db.Pool)
	s.worker()
	s.waitStatus(e.id, claim.Completed, 90*time.Second)
	calls := s.down.callsFor(key(e.id, "step1"))
	require.Len(t, calls, 2, "the rescued step 1 tried once more")
	require.Equal(t, 1, s.down.effectsOf(key(e.id, "step1")), "the downstream deduplicated the repeat")
	require.Len(t, s.down.callsFor(key(e.id, "step2")), 1, "step 2 ran exactly once")
	require.Zero(t, s.routeJobs(e.id, "step2"), "step 2's job's row went with its end")
}

// TestChainSkipped: a business-key duplicate for step 1 makes step 2
// skipped too, naming the same holder, with no call.
func TestChainSkipped(t *testing.T) {
	t.Parallel()
	routes := twoSteps()
	routes[0].businessKey = []string{"type", "json:data.id"}
	s := newStack(t, routes)
	ingest := s.ingest()
	s.worker()
	holder := event{id: "evt_chain_holder", typ: "order.paid", object: "ord_1"}
	dup := event{id: "evt_chain_dup", typ: "order.paid", object: "ord_1"}
	s.claimed(ingest, holder)
	s.waitStatus(holder.id, claim.Completed, settle)
	s.claimed(ingest, dup)
	_, ds := s.waitStatus(dup.id, claim.Ignored, settle)
	for _, r := range []string{"step1", "step2"} {
		d := deliveryOf(t, ds, r)
		require.Equal(t, claim.DeliverySkipped, d.Status, r)
		require.Equal(t, "business key is held by "+provider+"/"+holder.id, d.LastError, r)
	}
	require.Empty(t, s.down.callsOfEvent(dup.id))
	require.Zero(t, s.jobsOf(dup.id))
}

// TestChainConfigErrors: after must name routes that exist, of the same
// provider, without a cycle; each is refused at start, naming the routes.
func TestChainConfigErrors(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		routes []route
		want   string
	}{
		"UnknownName": {
			routes: []route{{name: "label", events: []string{"*"}, extra: after("shipment")}},
			want:   `routes[0].after[0]: route "label" runs after "shipment", which is not a configured route`,
		},
		"OtherProvider": {
			routes: []route{
				{name: "push", events: []string{"*"}, provider: githubProvider},
				{name: "label", events: []string{"*"}, extra: after("push")},
			},
			want: `routes[1].after[0]: route "label" (provider "sw") cannot run after "push", a route of provider "gh"`,
		},
		"Cycle": {
			routes: []route{
				{name: "a", events: []string{"*"}, extra: after("b")},
				{name: "b", events: []string{"*"}, extra: after("a")},
			},
			want: `routes form a cycle: "a" -> "b" -> "a"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, tt.routes)
			for _, bin := range []string{bins.ingest, bins.worker} {
				ctx, cancel := context.WithTimeout(t.Context(), settle)
				cmd := exec.CommandContext(ctx, bin)
				cmd.Env = s.env
				out, err := cmd.CombinedOutput()
				cancel()
				require.Error(t, err, "%s started with %s", bin, name)
				require.Contains(t, string(out), tt.want, bin)
			}
		})
	}
}

// TestChainGroupCommit: 200 events at once, claimed in group-commit
// batches, each through a two-step chain: 200 step-1 calls and 200 step-2
// calls, each key once, each event's step 2 after its step 1.
func TestChainGroupCommit(t *testing.T) {
	t.Parallel()
	s := newStack(t, twoSteps())
	ingest := s.ingest()
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.claimed(ingest, event{id: fmt.Sprintf("evt_chain_%03d", i), typ: "order.paid"})
		}()
	}
	wg.Wait()
	var waiting int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(),
		`SELECT count(*) FROM webhook_deliveries WHERE route = 'step2' AND status = 'waiting'`).Scan(&waiting))
	require.Equal(t, n, waiting, "every step 2 waits, claimed with no job")
	for _, j := range testfactory.Jobs(t.Context(), t, s.db.Pool, testfactory.JobWhere{Kind: claim.DeliveryKind}) {
		var a claim.DeliveryArgs
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
		require.NotEqual(t, "step2", a.Route, "no job for a waiting step 2")
	}

	s.worker()
	require.Eventually(t, func() bool {
		var done int
		err := s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE status = 'completed'`).Scan(&done)
		return err == nil && done == n
	}, 3*settle, 100*time.Millisecond)
	for i := range n {
		id := fmt.Sprintf("evt_chain_%03d", i)
		one, two := s.down.callsFor(key(id, "step1")), s.down.callsFor(key(id, "step2"))
		require.Len(t, one, 1, id)
		require.Len(t, two, 1, id)
		require.False(t, two[0].at.Before(one[0].at), id)
	}
}

// TestChainFanInBehindAFailedPredecessor: c runs after a and b; b fails for
// good (400) and a completes. c stays waiting, with no job and no call,
// through the end statement and through the reconciler: the test waits
// for a reconcile run that started after c had been untouched for longer
// than reconcile_interval, so the reconciler really looked at it.
func TestChainFanInBehindAFailedPredecessor(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "a", events: []string{"*"}},
		{name: "b", events: []string{"*"}},
		{name: "c", events: []string{"*"}, extra: after("a", "b")},
	}, setting{"reconcile_interval", "1s"})
	s.down.set("b", answers(http.StatusBadRequest))
	ingest := s.ingest()
	s.worker()
	e := event{id: "evt_chain_fan_fail", typ: "order.paid"}
	s.claimed(ingest, e)
	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "a").Status)
	require.Equal(t, claim.DeliveryFailed, deliveryOf(t, ds, "b").Status)
	c := deliveryOf(t, ds, "c")
	require.Equal(t, deliveryWaiting, c.Status)

	require.Eventually(t, func() bool {
		for _, j := range testfactory.Jobs(context.Background(), t, s.db.Pool, testfactory.JobWhere{Kind: maintenance.ReconcileKind, State: rivertype.JobStateCompleted}) {
			if j.AttemptedAt != nil && j.AttemptedAt.After(c.UpdatedAt.Add(2*time.Second)) {
				return true
			}
		}
		return false
	}, settle, 50*time.Millisecond, "a reconcile run that saw c stale")
	_, ds = s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, deliveryWaiting, deliveryOf(t, ds, "c").Status)
	require.Zero(t, s.routeJobs(e.id, "c"), "no job for c behind the failed b")
	require.Empty(t, s.down.callsFor(key(e.id, "c")))
}
