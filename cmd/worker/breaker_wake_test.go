package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// A delivery held back while the probe ran, whose snooze (until the end of
// the probe's lease, over a minute here) committed just after the close
// woke the route's held jobs, is delivered within seconds of the probe's
// success, not when the lease ends: the worker that closed the circuit
// wakes the route's held jobs again a moment later.
func TestHeldJobFlowsSoonAfterTheProbeCloses(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	var calls atomic.Int32
	release := make(chan struct{})
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // opens the circuit
			return
		case 2:
			select { // the probe, held until the test lets it answer
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(down.Close)
	// A 40s timeout makes the probe's lease 65s.
	cfg := appendConfig(t, writeConfig(t, down.URL), "    timeout: 40s\n    breaker: {failures: 1, cool_down: 100ms}\n")
	w := serveWorker(t, workerEnv(db, cfg))
	store := newStore(t, db)
	breaker := func() claim.Breaker {
		bs, err := store.Breakers(t.Context(), []string{"ship"})
		require.NoError(t, err)
		return bs["ship"]
	}

	claimEvent(t, store, "evt_1", `{}`)
	var probe claim.Breaker
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		probe = breaker()
		require.Equal(c, claim.BreakerHalfOpen, probe.State)
	}, 30*time.Second, 10*time.Millisecond, "the retry of evt_1 probes:\n%s", w.logs)
	require.Greater(t, probe.ProbeUntil.Sub(probe.Now), time.Minute)
	close(release)
	waitStatus(t, store, "evt_1", claim.Completed, w.logs)
	require.Equal(t, claim.BreakerClosed, breaker().State)

	// evt_2's job as a job that read the circuit half-open an instant
	// before the close leaves it: snoozed until the lease ends, the snooze
	// committed after the close's wake-up.
	require.NoError(t, pgx.BeginFunc(t.Context(), db.Pool, func(tx pgx.Tx) error {
		jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
		require.NoError(t, err)
		_, err = claim.NewStore(tx, jobs, func(string) int { return 3 }).Claim(t.Context(),
			claim.Event{Provider: "stripe", ID: "evt_2", Type: "invoice.paid", Payload: []byte(`{}`)}, []string{"ship"}, true)
		require.NoError(t, err)
		ids := testfactory.SetJobs(t.Context(), t, tx, testfactory.JobWhere{Delivery: claim.Key{Provider: "stripe", EventID: "evt_2", Route: "ship"}},
			&testfactory.JobOpts{State: rivertype.JobStateScheduled, ScheduledAt: testfactory.In(time.Until(*probe.ProbeUntil))})
		require.Len(t, ids, 1)
		return nil
	}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, _, err := store.Get(t.Context(), "stripe", "evt_2")
		require.NoError(c, err)
		require.Equal(c, claim.Completed, cl.Status)
	}, 15*time.Second, 20*time.Millisecond, "evt_2 waits out the probe's lease:\n%s", w.logs)
}
