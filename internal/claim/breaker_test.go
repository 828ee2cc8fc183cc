package claim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

var breakerSettings = claim.BreakerSettings{Failures: 3, CoolDown: 10 * time.Second, MaxCoolDown: 25 * time.Second}

func TestBreakerNext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	closed := claim.Breaker{State: claim.BreakerClosed}
	step := func(b claim.Breaker, ev claim.BreakerEvent) (claim.Breaker, string) {
		return b.Next(ev, now, breakerSettings, now)
	}

	b, action := step(closed, claim.BreakerFailed)
	require.Equal(t, claim.BreakerClosed, b.State)
	require.Equal(t, 1, b.Failures)
	require.Empty(t, action)
	b, _ = step(b, claim.BreakerFailed)
	b, action = step(b, claim.BreakerFailed)
	require.Equal(t, claim.ActionBreakerOpen, action, "the third consecutive failure opens it")
	require.Equal(t, claim.BreakerOpen, b.State)
	require.Equal(t, now.Add(10*time.Second), *b.NextProbeAt)
	require.Equal(t, now, *b.Since)

	again, action := step(b, claim.BreakerFailed)
	require.Empty(t, action, "an attempt sent before it opened changes nothing")
	require.Equal(t, b, again)

	half := b
	half.State = claim.BreakerHalfOpen
	b, action = step(half, claim.BreakerProbeFailed)
	require.Equal(t, claim.ActionBreakerOpen, action)
	require.Equal(t, 20*time.Second, b.CoolDown, "a failed probe doubles the wait")
	half = b
	half.State = claim.BreakerHalfOpen
	b, _ = step(half, claim.BreakerProbeFailed)
	require.Equal(t, 25*time.Second, b.CoolDown, "up to max_cool_down")
	require.Equal(t, now.Add(25*time.Second), *b.NextProbeAt)

	half = b
	half.State = claim.BreakerHalfOpen
	released, action := step(half, claim.BreakerProbeReleased)
	require.Empty(t, action)
	require.Equal(t, claim.BreakerHalfOpen, released.State)
	require.Equal(t, now, *released.ProbeUntil, "a released probe may be taken again at once")

	b, action = step(half, claim.BreakerProbeDelivered)
	require.Equal(t, claim.ActionBreakerClose, action)
	require.Equal(t, claim.BreakerClosed, b.State)
	require.Zero(t, b.Failures)
	require.Nil(t, b.NextProbeAt)

	_, action = step(closed, claim.BreakerClosedByHand)
	require.Empty(t, action, "closing a closed circuit is no change")
	_, action = step(claim.Breaker{State: claim.BreakerOpen}, claim.BreakerClosedByHand)
	require.Equal(t, claim.ActionBreakerClose, action)
	_, action = step(closed, claim.BreakerProbeDelivered)
	require.Empty(t, action, "a probe outcome without a half-open circuit changes nothing")
}

// TestBreakerInPostgres drives one route's breaker through the store: it
// opens at the threshold, grants exactly one probe among concurrent asks
// once due, reopens with twice the wait, and closes on a delivered probe,
// waking the route's snoozed jobs. Every change of state is audited with
// actor breaker.
func TestBreakerInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, client, func(string) int { return 5 })
	set := claim.BreakerSettings{Failures: 2, CoolDown: 200 * time.Millisecond, MaxCoolDown: time.Second}

	bs, err := store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	require.Equal(t, claim.BreakerClosed, bs["r"].State, "a route without a row is closed")

	ch, err := store.BreakerApply(ctx, "r", claim.BreakerFailed, set, nil)
	require.NoError(t, err)
	require.Empty(t, ch.Action)
	changed, err := store.BreakerDelivered(ctx, "r", time.Now(), time.Minute)
	require.NoError(t, err)
	require.True(t, changed)
	bs, err = store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	require.Zero(t, bs["r"].Failures, "a delivery resets the count")
	for range 2 {
		ch, err = store.BreakerApply(ctx, "r", claim.BreakerFailed, set, nil)
		require.NoError(t, err)
	}
	require.Equal(t, claim.ActionBreakerOpen, ch.Action)
	require.Equal(t, claim.BreakerOpen, ch.State)

	granted, b, err := store.BreakerProbe(ctx, "r", time.Minute)
	require.NoError(t, err)
	require.False(t, granted, "no probe before the cool-down ends")
	require.Equal(t, claim.BreakerOpen, b.State)

	probe := func() int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		grants := 0
		for range 8 {
			wg.Go(func() {
				ok, _, err := store.BreakerProbe(ctx, "r", time.Minute)
				require.NoError(t, err)
				if ok {
					mu.Lock()
					grants++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return grants
	}
	require.Eventually(t, func() bool {
		bs, err := store.Breakers(ctx, []string{"r"})
		return err == nil && !bs["r"].Now.Before(*bs["r"].NextProbeAt)
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, probe(), "exactly one probe among concurrent asks")
	require.Zero(t, probe(), "none while the probe's lease runs")

	ch, err = store.BreakerApply(ctx, "r", claim.BreakerProbeFailed, set, nil)
	require.NoError(t, err)
	require.Equal(t, claim.ActionBreakerOpen, ch.Action)
	require.Equal(t, 400*time.Millisecond, ch.CoolDown)

	// A lease that expires (its prober died) is granted again.
	require.Eventually(t, func() bool {
		ok, _, err := store.BreakerProbe(ctx, "r", time.Millisecond)
		return err == nil && ok
	}, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		ok, _, err := store.BreakerProbe(ctx, "r", time.Minute)
		return err == nil && ok
	}, 5*time.Second, 20*time.Millisecond)

	// A job snoozed meanwhile is woken when the circuit closes.
	_, err = testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "p", ID: "evt_1", Type: "t", Payload: []byte("{}")}, []string{"r"}, false)
	require.NoError(t, err)
	ids := testfactory.SetJobs(ctx, t, db.Pool, testfactory.JobWhere{}, &testfactory.JobOpts{State: rivertype.JobStateScheduled, ScheduledAt: testfactory.In(time.Hour)})
	require.Len(t, ids, 1)

	ch, err = store.BreakerApply(ctx, "r", claim.BreakerProbeDelivered, set, nil)
	require.NoError(t, err)
	require.Equal(t, claim.ActionBreakerClose, ch.Action)
	require.Equal(t, claim.BreakerClosed, ch.State)
	job, err := client.JobGet(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateAvailable, job.State)
	require.False(t, job.ScheduledAt.After(time.Now().Add(time.Second)))

	rows, err := db.Pool.Query(ctx, `SELECT actor, action, target, detail->>'state' FROM audit_log ORDER BY id`)
	require.NoError(t, err)
	var got [][4]string
	for rows.Next() {
		var r [4]string
		require.NoError(t, rows.Scan(&r[0], &r[1], &r[2], &r[3]))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, [][4]string{
		{"breaker", "breaker_open", "r", "open"},
		{"breaker", "breaker_half_open", "r", "half_open"},
		{"breaker", "breaker_open", "r", "open"},
		{"breaker", "breaker_half_open", "r", "half_open"},
		{"breaker", "breaker_close", "r", "closed"},
	}, got)
}
