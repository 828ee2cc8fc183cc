package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/maintenance"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// settle is how long a test waits for a delivery that needs no retry.
const settle = 30 * time.Second

func TestDuplicatesAndSignatures(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}, signed: true}})
	ingest, _ := s.ingest(), s.worker()

	t.Run("ConcurrentCopiesOfOneEventHaveOneEffect", func(t *testing.T) {
		e := event{id: "evt_dup", typ: "order.paid"}
		const copies = 50
		acks := make([]ack, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() { acks[i] = s.send(ingest, e, providerSecret) })
		}
		wg.Wait()
		fresh := 0
		for _, a := range acks {
			require.Equal(t, http.StatusOK, a.status)
			if !a.duplicate {
				fresh++
			}
		}
		require.Equal(t, 1, fresh, "exactly one copy wins the claim")

		c, ds := s.waitStatus(e.id, claim.Completed, settle)
		require.Equal(t, 1, c.AttemptCount)
		require.Len(t, ds, 1)
		require.Zero(t, s.jobsOf(e.id), "the one job's row went with its end")
		calls := s.down.callsFor(key(e.id, "ship"))
		require.Len(t, calls, 1, "one request downstream")
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")))
		require.True(t, calls[0].verified, "forwarded event carries a valid Standard Webhooks signature")
		require.Equal(t, key(e.id, "ship"), calls[0].header.Get("webhook-id"))
		require.Equal(t, string(e.body()), string(calls[0].body), "body forwarded byte for byte")
		require.Equal(t, "application/json", calls[0].header.Get("Content-Type"))
		require.Equal(t, "order.paid", calls[0].header.Get("Hookgate-Event-Type"))
	})

	t.Run("InvalidSignatureReservesNothing", func(t *testing.T) {
		e := event{id: "evt_forged", typ: "order.paid"}
		forger := "whsec_" + strings.Repeat("A", 43) + "="
		require.Equal(t, http.StatusUnauthorized, s.send(ingest, e, forger).status)

		_, _, err := s.store.Get(t.Context(), provider, e.id)
		require.ErrorIs(t, err, claim.ErrNotFound, "no claim")
		require.Zero(t, s.jobsOf(e.id), "no job, so nothing can ever be sent")
		require.Empty(t, s.down.callsOfEvent(e.id))

		// The key was not reserved: the genuine event is accepted and delivered.
		s.claimed(ingest, e)
		s.waitStatus(e.id, claim.Completed, settle)
		require.Len(t, s.down.callsOfEvent(e.id), 1)
	})
}

func TestWorkerDownWhenEventIsClaimed(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}})
	ingest := s.ingest()
	e := event{id: "evt_early", typ: "order.paid"}
	s.claimed(ingest, e)
	c, _, err := s.store.Get(t.Context(), provider, e.id)
	require.NoError(t, err)
	require.Equal(t, claim.Processing, c.Status)
	require.Equal(t, 1, s.jobsOf(e.id), "the job is committed with the claim")
	require.Empty(t, s.down.callsOfEvent(e.id))

	s.worker()
	s.waitStatus(e.id, claim.Completed, settle)
	require.Len(t, s.down.callsFor(key(e.id, "ship")), 1)
	require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")))
}

// TestWorkerKilledAfterTheSideEffect kills the worker while the downstream,
// having performed the effect, holds its answer. River rescues the job after
// rescue_after; the retry carries the same key and the downstream dedupes it.
// The rescue needs the new worker to become River's leader: rather than wait
// out the dead one's term (about 15s), the test ends it, as its expiry would.
// The retry carries the next Hookgate-Attempt: River counted the crashed
// attempt when it fetched the job.
func TestWorkerKilledAfterTheSideEffect(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}, timeout: 2 * time.Second}},
		setting{"rescue_after", "4s"})
	e := event{id: "evt_crash", typ: "order.paid"}
	arrived, release := make(chan struct{}), make(chan struct{})
	s.down.set("ship", func(c *call, n int, _ http.ResponseWriter) int {
		if n == 1 {
			s.down.effect(c.key) // the effect happens, the answer is late
			close(arrived)
			select {
			case <-release:
			case <-c.ctx.Done(): // the test failed and is cleaning up
			}
		}
		return http.StatusOK
	})
	ingest, first := s.ingest(), s.worker()
	s.claimed(ingest, e)

	select {
	case <-arrived:
	case <-time.After(settle):
		t.Fatal("the first attempt never arrived")
	}
	first.kill()
	close(release) // answers 200 to a worker that is gone

	c, _, err := s.store.Get(t.Context(), provider, e.id)
	require.NoError(t, err)
	require.Equal(t, claim.Processing, c.Status, "nothing recorded by the killed worker")

	// The new leader's rescuer looks once at start, then every 30s: start
	// it once the job has run for longer than rescue_after.
	require.Eventually(t, func() bool {
		return s.runningSince(e.id, 4*time.Second)
	}, settle, 50*time.Millisecond)
	testfactory.ExpireLeader(t.Context(), t, s.db.Pool)
	s.worker()
	c, ds := s.waitStatus(e.id, claim.Completed, 90*time.Second)
	calls := s.down.callsFor(key(e.id, "ship"))
	require.Len(t, calls, 2, "the rescued job tried once more")
	require.Equal(t, calls[0].key, calls[1].key)
	require.Equal(t, []string{"1", "2"}, s.down.attempts(key(e.id, "ship")),
		"the crashed attempt's number is not sent again")
	require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")), "the downstream deduplicated the repeat")
	require.Equal(t, 1, deliveryOf(t, ds, "ship").AttemptCount, "only the rescued attempt was recorded")
	require.Equal(t, 1, c.AttemptCount)
}

func TestFanOutAndEventTypes(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "ship", events: []string{"order.*"}},
		{name: "mail", events: []string{"order.created"}},
	})
	s.down.set("mail", answers(http.StatusUnprocessableEntity, http.StatusOK))
	ingest, _ := s.ingest(), s.worker()

	t.Run("SameObjectDifferentEventTypesAreTwoEffects", func(t *testing.T) {
		paid := event{id: "evt_paid", typ: "order.paid", object: "ord_1"}
		shipped := event{id: "evt_shipped", typ: "order.shipped", object: "ord_1"}
		s.claimed(ingest, paid)
		s.claimed(ingest, shipped)
		s.waitStatus(paid.id, claim.Completed, settle)
		s.waitStatus(shipped.id, claim.Completed, settle)
		require.NotEqual(t, key(paid.id, "ship"), key(shipped.id, "ship"))
		require.Equal(t, 1, s.down.effectsOf(key(paid.id, "ship")))
		require.Equal(t, 1, s.down.effectsOf(key(shipped.id, "ship")))
	})

	t.Run("EachRouteIsItsOwnDelivery", func(t *testing.T) {
		e := event{id: "evt_created", typ: "order.created"}
		s.claimed(ingest, e)
		c, ds := s.waitStatus(e.id, claim.Failed, settle)
		require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "ship").Status, "a failing route does not hold back the other")
		mail := deliveryOf(t, ds, "mail")
		require.Equal(t, claim.DeliveryFailed, mail.Status)
		require.Equal(t, 1, mail.AttemptCount, "a 422 is not retried")
		require.Equal(t, "HTTP 422 Unprocessable Entity", mail.LastError)
		require.Equal(t, "HTTP 422 Unprocessable Entity", c.LastError)
		require.NotEqual(t, key(e.id, "ship"), key(e.id, "mail"))
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")))
		require.Zero(t, s.down.effectsOf(key(e.id, "mail")))

		out, code := s.run("claims", "show", provider, e.id, "--json")
		require.Zero(t, code, out)
		var shown struct {
			Status     claim.Status `json:"status"`
			Deliveries []struct {
				Route          string               `json:"route"`
				Status         claim.DeliveryStatus `json:"status"`
				AttemptCount   int                  `json:"attempt_count"`
				LastError      string               `json:"last_error"`
				IdempotencyKey string               `json:"idempotency_key"`
			} `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
		require.Equal(t, claim.Failed, shown.Status)
		require.Len(t, shown.Deliveries, 2)
		require.Equal(t, "mail", shown.Deliveries[0].Route)
		require.Equal(t, "HTTP 422 Unprocessable Entity", shown.Deliveries[0].LastError)
		require.Equal(t, key(e.id, "mail"), shown.Deliveries[0].IdempotencyKey)

		// The operator retries the claim: only the failed delivery runs again.
		out, code = s.run("claims", "retry", provider, e.id)
		require.Zero(t, code, out)
		require.Contains(t, out, "reopened 1 delivery")
		c, ds = s.waitStatus(e.id, claim.Completed, settle)
		require.Equal(t, 3, c.AttemptCount, "ship once, mail twice")
		require.Equal(t, 2, deliveryOf(t, ds, "mail").AttemptCount)
		require.Len(t, s.down.callsFor(key(e.id, "ship")), 1, "the completed delivery was not re-run")
		require.Equal(t, []string{"1", "2"}, s.down.attempts(key(e.id, "mail")))
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "mail")))

		out, code = s.run("claims", "retry", provider, e.id)
		require.NotZero(t, code)
		require.Contains(t, out, "is completed")
		require.Contains(t, out, "--force")
		// --force re-runs every delivery, under the same keys: the downstream
		// hears them again and performs nothing twice.
		out, code = s.run("claims", "retry", provider, e.id, "--force")
		require.Zero(t, code, out)
		require.Contains(t, out, "reopened 2 deliveries")
		s.waitStatus(e.id, claim.Completed, settle)
		require.Equal(t, []string{"1", "2"}, s.down.attempts(key(e.id, "ship")))
		require.Equal(t, []string{"1", "2", "3"}, s.down.attempts(key(e.id, "mail")))
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")))
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "mail")))

		out, code = s.run("claims", "retry", provider, "evt_nonexistent")
		require.NotZero(t, code)
		require.Contains(t, out, "no claim sw/evt_nonexistent")

		out, code = s.run("claims", "list", "--status", "completed", "--json")
		require.Zero(t, code, out)
		require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 3, out)
		out, code = s.run("claims", "list")
		require.Zero(t, code, out)
		require.Contains(t, out, "evt_created")
	})
}

func TestRetries(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "flaky", events: []string{"flaky"}},
		{name: "throttled", events: []string{"throttled"}, max: 5 * time.Second},
		{name: "capped", events: []string{"capped"}, max: time.Second},
		{name: "slow", events: []string{"slow"}, timeout: 300 * time.Millisecond},
		{name: "reject", events: []string{"reject"}},
		{name: "down", events: []string{"down"}, maxAttempts: 3},
	})
	retryAfter := func(value string) behaviour {
		return func(_ *call, n int, w http.ResponseWriter) int {
			if n == 1 {
				w.Header().Set("Retry-After", value)
				return http.StatusTooManyRequests
			}
			return http.StatusOK
		}
	}
	s.down.set("flaky", answers(http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusOK))
	s.down.set("throttled", retryAfter("1"))
	s.down.set("capped", retryAfter("3600"))
	s.down.set("slow", func(c *call, n int, _ http.ResponseWriter) int {
		if n == 1 {
			<-c.ctx.Done() // never answers; the worker gives up at the route's timeout
		}
		return http.StatusOK
	})
	s.down.set("reject", answers(http.StatusBadRequest))
	s.down.set("down", answers(http.StatusServiceUnavailable))
	ingest, _ := s.ingest(), s.worker()
	for _, typ := range []string{"flaky", "throttled", "capped", "slow", "reject", "down"} {
		s.claimed(ingest, event{id: "evt_" + typ, typ: typ})
	}

	t.Run("ServerErrorsTwiceThenSuccess", func(t *testing.T) {
		c, ds := s.waitStatus("evt_flaky", claim.Completed, settle)
		require.Equal(t, 3, deliveryOf(t, ds, "flaky").AttemptCount)
		require.Equal(t, 3, c.AttemptCount)
		k := key("evt_flaky", "flaky")
		require.Equal(t, []string{"1", "2", "3"}, s.down.attempts(k), "one key, attempts numbered")
		require.Equal(t, 1, s.down.effectsOf(k))
	})

	t.Run("RetryAfterIsHonoured", func(t *testing.T) {
		s.waitStatus("evt_throttled", claim.Completed, settle)
		calls := s.down.callsFor(key("evt_throttled", "throttled"))
		require.Len(t, calls, 2)
		require.GreaterOrEqual(t, calls[1].at.Sub(calls[0].at), 900*time.Millisecond,
			"asked for 1s; the backoff alone would have waited about 10ms")
	})

	t.Run("RetryAfterIsCappedByBackoffMax", func(t *testing.T) {
		s.waitStatus("evt_capped", claim.Completed, settle)
		calls := s.down.callsFor(key("evt_capped", "capped"))
		require.Len(t, calls, 2)
		gap := calls[1].at.Sub(calls[0].at)
		require.GreaterOrEqual(t, gap, 900*time.Millisecond, "Retry-After wins over the 10ms backoff…")
		require.Less(t, gap, 5*time.Second, "…up to backoff.max (1s), not the hour asked for")
	})

	t.Run("TimeoutIsRetried", func(t *testing.T) {
		_, ds := s.waitStatus("evt_slow", claim.Completed, settle)
		d := deliveryOf(t, ds, "slow")
		require.Equal(t, 2, d.AttemptCount)
		require.Empty(t, d.LastError, "a completion clears it")
		as, err := s.store.Attempts(t.Context(), provider, "evt_slow", false)
		require.NoError(t, err)
		require.Equal(t, "timeout after 300ms", *as["slow"][0].Error, "the history keeps the failure")
		require.Len(t, s.down.callsFor(key("evt_slow", "slow")), 2)
	})

	t.Run("RejectionFailsAfterOneAttempt", func(t *testing.T) {
		_, ds := s.waitStatus("evt_reject", claim.Failed, settle)
		d := deliveryOf(t, ds, "reject")
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, "HTTP 400 Bad Request", d.LastError)
		require.Len(t, s.down.callsFor(key("evt_reject", "reject")), 1)
	})

	t.Run("ExhaustedAttemptsFailWithTheReason", func(t *testing.T) {
		c, ds := s.waitStatus("evt_down", claim.Failed, settle)
		d := deliveryOf(t, ds, "down")
		require.Equal(t, 3, d.AttemptCount)
		require.Equal(t, "attempts exhausted (3 of 3): HTTP 503 Service Unavailable", d.LastError)
		require.Equal(t, d.LastError, c.LastError)
		require.Len(t, s.down.callsFor(key("evt_down", "down")), 3)
	})

	t.Run("RedeliveryOfAFailedEventReopensIt", func(t *testing.T) {
		s.down.set("reject", answers(http.StatusOK))
		a := s.send(ingest, event{id: "evt_reject", typ: "reject"}, providerSecret)
		require.Equal(t, ack{status: http.StatusOK, duplicate: false}, a, "reopened, not a duplicate")
		_, ds := s.waitStatus("evt_reject", claim.Completed, settle)
		require.Equal(t, 2, deliveryOf(t, ds, "reject").AttemptCount)
		k := key("evt_reject", "reject")
		require.Equal(t, []string{"1", "2"}, s.down.attempts(k), "Hookgate-Attempt continues across the reopen")
		require.Equal(t, 1, s.down.effectsOf(k))
	})

	t.Run("OperatorRetriesFailedClaims", func(t *testing.T) {
		s.down.set("down", answers(http.StatusOK))
		out, code := s.run("claims", "retry", "--status", "failed", "--provider", provider)
		require.Zero(t, code, out)
		require.Contains(t, out, "sw/evt_down: reopened 1 delivery")
		require.Contains(t, out, "reopened 1 delivery of 1 failed claim")
		c, ds := s.waitStatus("evt_down", claim.Completed, settle)
		require.Equal(t, 4, deliveryOf(t, ds, "down").AttemptCount)
		require.Equal(t, 4, c.AttemptCount)
		k := key("evt_down", "down")
		require.Equal(t, []string{"1", "2", "3", "4"}, s.down.attempts(k))
		require.Equal(t, 1, s.down.effectsOf(k))
	})
}

func TestSeveralWorkers(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}}, setting{"concurrency", "4"})
	ingest := s.ingest()
	workers := []*proc{s.worker(), s.worker(), s.worker()}

	const events = 150
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range events {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.claimed(ingest, event{id: fmt.Sprintf("evt_%03d", i), typ: "order.paid"})
		})
	}
	wg.Wait()

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var done int
		require.NoError(c, s.db.Pool.QueryRow(t.Context(),
			`SELECT count(*) FROM webhook_event_claims WHERE status = 'completed'`).Scan(&done))
		require.Equal(c, events, done, "claims completed")
	}, 60*time.Second, 50*time.Millisecond)
	for i := range events {
		k := key(fmt.Sprintf("evt_%03d", i), "ship")
		require.Len(t, s.down.callsFor(k), 1, "event %d delivered more than once", i)
	}
	busy := 0
	for _, w := range workers {
		require.False(t, w.exited(), "%s exited:\n%s", w.name, w.out.String())
		n := strings.Count(w.out.String(), "msg=delivered")
		t.Logf("worker pid %d delivered %d events", w.cmd.Process.Pid, n)
		if n > 0 {
			busy++
		}
	}
	require.GreaterOrEqual(t, busy, 2, "the events were shared among the workers")
}

// TestShutdownReturnsInterruptedDeliveriesToTheQueue stops a worker
// (SIGTERM) while a call hangs: after shutdown_timeout the call is cancelled,
// recorded as interrupted, and its job goes back to the queue without using
// up an attempt; the next worker delivers it.
func TestShutdownReturnsInterruptedDeliveriesToTheQueue(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}, timeout: 20 * time.Second, maxAttempts: 1}},
		setting{"shutdown_timeout", "1s"})
	arrived := make(chan struct{})
	s.down.set("ship", func(c *call, n int, _ http.ResponseWriter) int {
		if n == 1 {
			close(arrived)
			<-c.ctx.Done() // held until the worker gives up on it
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ingest, w := s.ingest(), s.worker()
	e := event{id: "evt_shutdown", typ: "order.paid"}
	s.claimed(ingest, e)
	select {
	case <-arrived:
	case <-time.After(settle):
		t.Fatal("the first attempt never arrived")
	}

	start := time.Now()
	w.stop()
	require.Less(t, time.Since(start), 10*time.Second, "shutdown_timeout is 1s")
	require.Zero(t, w.cmd.ProcessState.ExitCode(), w.out.String())

	c, ds, err := s.store.Get(t.Context(), provider, e.id)
	require.NoError(t, err)
	require.Equal(t, claim.Processing, c.Status)
	d := deliveryOf(t, ds, "ship")
	require.Equal(t, 1, d.AttemptCount, "the interrupted call is counted")
	require.Equal(t, "interrupted: the worker was stopping", d.LastError)
	jobs := testfactory.Jobs(t.Context(), t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: e.id}})
	require.Len(t, jobs, 1)
	require.Equal(t, rivertype.JobStateAvailable, jobs[0].State)
	require.Zero(t, jobs[0].Attempt, "the job's only attempt (max_attempts 1) was given back")

	s.worker()
	s.waitStatus(e.id, claim.Completed, settle)
	k := key(e.id, "ship")
	require.Equal(t, []string{"1", "2"}, s.down.attempts(k))
	require.Equal(t, 1, s.down.effectsOf(k))
}

// TestReconcilerRequeuesDeliveriesWithoutAJob deletes the job of a
// processing delivery (as an operator could in the River UI); the
// reconciler notices and enqueues a new one.
func TestReconcilerRequeuesDeliveriesWithoutAJob(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}}, setting{"reconcile_interval", "1s"})
	ingest := s.ingest()
	e := event{id: "evt_orphan", typ: "order.paid"}
	s.claimed(ingest, e)
	gone := testfactory.DeleteJobs(t.Context(), t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: e.id}})
	require.Len(t, gone, 1)

	w := s.worker()
	s.waitStatus(e.id, claim.Completed, settle)
	require.Len(t, s.down.callsFor(key(e.id, "ship")), 1)
	require.Contains(t, w.out.String(), "requeued=1")
}

func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}})
	const password = "correct horse battery staple"
	s.env = append(s.env, "HOOKGATE_UI_PASSWORD="+password)
	ingest, w := s.ingest(), s.worker()
	e := event{id: "evt_ops", typ: "order.paid"}
	s.claimed(ingest, e)
	s.waitStatus(e.id, claim.Completed, settle)

	get := func(path string, auth ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, w.url+path, nil)
		require.NoError(t, err)
		if len(auth) == 2 {
			req.SetBasicAuth(auth[0], auth[1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}

	code, body := get("/readyz")
	require.Equal(t, http.StatusOK, code, body)

	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`hookgate_deliveries_total{outcome="completed",route="ship"} 1`,
		`hookgate_deliveries_total{outcome="retry",route="ship"} 0`,
		`hookgate_attempt_duration_seconds_count{route="ship"} 1`,
		`hookgate_claim_to_completion_seconds_count 1`,
		"hookgate_claims_processing 0",
		"hookgate_oldest_processing_claim_age_seconds 0",
	} {
		require.Contains(t, body, want+"\n")
	}

	code, _ = get("/riverui/")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get("/riverui/", "admin", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get("/riverui/", "root", password)
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = get("/riverui/", "admin", password)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "<html")
	// River's own completions are listed (the reconciler's first run, at
	// start); a delivery's job row went with its end.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get("/riverui/api/jobs?state=completed", "admin", password)
		require.Equal(c, http.StatusOK, code)
		require.Contains(c, body, maintenance.ReconcileKind)
		require.NotContains(c, body, claim.DeliveryKind)
	}, settle, 50*time.Millisecond)

	// Without the password the UI is not served at all.
	other := newStack(t, []route{{name: "ship", events: []string{"*"}}})
	resp, err := http.Get(other.worker().url + "/riverui/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
