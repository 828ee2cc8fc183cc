package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestBreakerNextAnswerOrder pins the ordering rule: a delivered answer
// drops the failures answered before it and keeps the ones after; a
// failure answered before the last delivered answer is not counted.
func TestBreakerNextAnswerOrder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	step := func(b claim.Breaker, ev claim.BreakerEvent, s int) claim.Breaker {
		n, _ := b.Next(ev, at(s), breakerSettings, now)
		return n
	}
	b := claim.Breaker{State: claim.BreakerClosed}
	b = step(b, claim.BreakerFailed, 1)
	b = step(b, claim.BreakerFailed, 3)
	require.Equal(t, 2, b.Failures)
	b = step(b, claim.BreakerDelivered, 2)
	require.Equal(t, 1, b.Failures, "a delivery whose write lands after a newer failure keeps that failure")
	require.Equal(t, []time.Time{at(3)}, b.FailedAt)
	require.Equal(t, at(2), *b.LastDeliveredAt)

	b = step(b, claim.BreakerDelivered, 5)
	require.Zero(t, b.Failures)
	b = step(b, claim.BreakerFailed, 4)
	require.Zero(t, b.Failures, "a failure answered before the last delivery does not count")
	require.Equal(t, at(4), *b.LastFailedAt)
	b = step(b, claim.BreakerDelivered, 4)
	require.Equal(t, at(5), *b.LastDeliveredAt, "an older delivery does not move the mark back")

	// Failures 6, 8 and the delivery 7 between them, written in any order
	// after the delivery 5: never three consecutive failures.
	for _, order := range [][]int{{6, 8, 7}, {8, 6, 7}, {7, 6, 8}, {6, 7, 8}} {
		o := b
		for _, s := range order {
			ev := claim.BreakerFailed
			if s == 7 {
				ev = claim.BreakerDelivered
			}
			o = step(o, ev, s)
		}
		require.Equal(t, claim.BreakerClosed, o.State, "%v", order)
		require.Equal(t, 1, o.Failures, "%v: only the failure after the delivery 7 counts", order)
	}
	o, _ := b.Next(claim.BreakerFailed, at(6), breakerSettings, now)
	o, _ = o.Next(claim.BreakerFailed, at(7), breakerSettings, now)
	o, action := o.Next(claim.BreakerFailed, at(8), breakerSettings, now)
	require.Equal(t, claim.ActionBreakerOpen, action, "three failures in answer order open it")
	require.Equal(t, claim.BreakerOpen, o.State)
}

// TestBreakerAnswerOrderInPostgres drives the rule through the store, with
// answers whose writes land out of order, and shows that a delivery's
// write waits for a failure's write under way and then drops it.
func TestBreakerAnswerOrderInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	store := claim.NewStore(db.Pool, nil, nil)
	set := claim.BreakerSettings{Failures: 2, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	ago := func(d time.Duration) time.Time { return time.Now().Add(-d) }
	failures := func(route string) int {
		bs, err := store.Breakers(ctx, []string{route})
		require.NoError(t, err)
		require.Equal(t, claim.BreakerClosed, bs[route].State)
		return bs[route].Failures
	}
	fail := func(route string, d time.Duration) {
		_, err := store.BreakerAnswer(ctx, route, claim.BreakerFailed, ago(d), "", set)
		require.NoError(t, err)
	}
	deliver := func(route string, d time.Duration) bool {
		changed, err := store.BreakerDelivered(ctx, route, ago(d), time.Minute)
		require.NoError(t, err)
		return changed
	}

	require.False(t, deliver("r", 0), "a route that never failed: no write")
	fail("r", 30*time.Second)
	require.Equal(t, 1, failures("r"))
	require.True(t, deliver("r", 20*time.Second))
	require.Zero(t, failures("r"))
	fail("r", 25*time.Second) // answered before the delivery, written after it
	require.Zero(t, failures("r"), "a failure older than the last delivery does not count")
	require.True(t, deliver("r", 19*time.Second), "a failure was heard of a moment ago: the delivery leaves its time")
	fail("r", 10*time.Second)
	deliver("r", 15*time.Second) // answered before the counted failure

	require.Equal(t, 1, failures("r"), "a delivery answered before a counted failure does not reset it")

	// A healthy route whose last failure is long past: no write.
	fail("h", time.Hour)
	require.True(t, deliver("h", 59*time.Minute))
	require.False(t, deliver("h", 0), "nothing counted, no failure heard of within a minute")

	// A failure's write under way (its transaction open): a delivery
	// answered after it waits for it, then drops it.
	require.NoError(t, store.Transact(ctx, func(tx *claim.Store) error {
		if _, err := tx.BreakerAnswer(ctx, "w", claim.BreakerFailed, ago(time.Second), "", set); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			_, err := store.BreakerDelivered(ctx, "w", time.Now(), time.Minute)
			done <- err
		}()
		require.Eventually(t, func() bool {
			var waiting int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting))
			return waiting == 1
		}, 10*time.Second, 10*time.Millisecond, "the delivery waits for the failure's write")
		t.Cleanup(func() { require.NoError(t, <-done) })
		return nil
	}))
	require.Eventually(t, func() bool { return failures("w") == 0 }, 10*time.Second, 10*time.Millisecond)
}

// TestDeliveredAnswersDoNotWaitForEachOther: a delivered answer takes the
// breaker's lock shared, so the deliveries of one route, many a second at
// a worker's full rate, never queue behind each other's round trips; only
// a change under way (a failure's write) makes them wait.
func TestDeliveredAnswersDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	store := claim.NewStore(db.Pool, nil, nil)

	// A delivered answer of route r whose transaction is still open.
	require.NoError(t, store.Transact(ctx, func(tx *claim.Store) error {
		if _, err := tx.BreakerDelivered(ctx, "r", time.Now(), time.Minute); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			_, err := store.BreakerDelivered(ctx, "r", time.Now(), time.Minute)
			done <- err
		}()
		var err error
		returned, waiting := false, 0
		require.Eventually(t, func() bool {
			select {
			case err = <-done:
				returned = true
				return true
			default:
			}
			if qerr := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); qerr != nil {
				err = qerr
				return true
			}
			return waiting > 0
		}, 10*time.Second, 10*time.Millisecond, "the second delivered answer neither returned nor waited")
		require.Zero(t, waiting, "a delivered answer waits for another delivered answer's transaction")
		require.True(t, returned)
		return err
	}))
}
