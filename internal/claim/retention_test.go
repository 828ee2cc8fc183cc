package claim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// Retention of the tests: payloads cleared after a day, claims deleted
// after ten.
var policy = claim.Retention{Claims: 10 * 24 * time.Hour, Payloads: 24 * time.Hour, BatchSize: 2}

// Ages relative to policy.
const (
	young = time.Hour            // kept whole
	mid   = 5 * 24 * time.Hour   // payload cleared, claim kept
	old   = 100 * 24 * time.Hour // deleted
)

// terminalAgo makes a stripe claim look terminal for ago.
func (b *bundle) terminalAgo(t *testing.T, id string, ago time.Duration) {
	t.Helper()
	testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: "stripe", EventID: id},
		&testfactory.ClaimOpts{TerminalAt: testfactory.Ago(ago)})
}

// stored reports whether a stripe claim exists, whether it still holds its
// payload, and how many deliveries it has.
func (b *bundle) stored(t *testing.T, id string) (exists, payload bool, deliveries int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `
SELECT EXISTS (SELECT 1 FROM webhook_event_claims WHERE provider = 'stripe' AND event_id = $1),
       EXISTS (SELECT 1 FROM webhook_event_claims WHERE provider = 'stripe' AND event_id = $1 AND payload IS NOT NULL),
       (SELECT count(*) FROM webhook_deliveries WHERE provider = 'stripe' AND event_id = $1)`, id).
		Scan(&exists, &payload, &deliveries))
	return exists, payload, deliveries
}

func TestTerminalAt(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	before := time.Now()

	b.claimed(t, "evt_a", "ship", "mail")
	c, _ := b.get(t, "evt_a")
	require.Nil(t, c.TerminalAt, "a processing claim has no terminal time")

	b.record(t, key("evt_a", "ship"), success)
	c, _ = b.get(t, "evt_a")
	require.Nil(t, c.TerminalAt, "still processing: mail is not done")

	b.record(t, key("evt_a", "mail"), reject)
	c, _ = b.get(t, "evt_a")
	require.Equal(t, claim.Failed, c.Status)
	require.NotNil(t, c.TerminalAt)
	require.WithinDuration(t, before, *c.TerminalAt, time.Minute)

	b.terminalAgo(t, "evt_a", old)
	_, err := b.store.Reopen(t.Context(), "stripe", "evt_a", false)
	require.NoError(t, err)
	c, _ = b.get(t, "evt_a")
	require.Nil(t, c.TerminalAt, "a reopen clears it")

	b.record(t, key("evt_a", "mail"), success)
	c, _ = b.get(t, "evt_a")
	require.Equal(t, claim.Completed, c.Status)
	require.NotNil(t, c.TerminalAt)
	require.WithinDuration(t, time.Now(), *c.TerminalAt, time.Minute, "ages afresh from the second settling")

	res, err := testfactory.ClaimEvent(t.Context(), b.store, event("evt_ignored"), nil, true)
	require.NoError(t, err)
	require.Equal(t, claim.ClaimedIgnored, res.Decision)
	c, _ = b.get(t, "evt_ignored")
	require.NotNil(t, c.TerminalAt, "an ignored claim is terminal from its insert")

	// Rewriting a terminal status unchanged keeps the time.
	b.terminalAgo(t, "evt_ignored", old)
	c, _ = b.get(t, "evt_ignored")
	testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: "stripe", EventID: "evt_ignored"}, &testfactory.ClaimOpts{Status: claim.Ignored})
	after, _ := b.get(t, "evt_ignored")
	require.Equal(t, c.TerminalAt, after.TerminalAt)

	// The database refuses a terminal claim without the time.
	_, err = b.db.Pool.Exec(t.Context(), `UPDATE webhook_event_claims SET terminal_at = NULL WHERE event_id = 'evt_ignored'`)
	require.ErrorContains(t, err, "webhook_event_claims_terminal_at_check")
}

func TestPrune(t *testing.T) {
	t.Parallel()
	b := setupDB(t)

	settled := func(id string, r claim.AttemptResult, ago time.Duration, routes ...string) {
		b.claimed(t, id, routes...)
		for _, route := range routes {
			b.record(t, key(id, route), r)
		}
		b.terminalAgo(t, id, ago)
	}
	ignored := func(id string, ago time.Duration) {
		_, err := testfactory.ClaimEvent(t.Context(), b.store, event(id), nil, true)
		require.NoError(t, err)
		b.terminalAgo(t, id, ago)
	}
	// Deleted: old terminal claims of every terminal status, more than a batch.
	settled("evt_old_completed", success, old, "ship", "mail")
	settled("evt_old_failed", reject, old, "ship")
	settled("evt_old_failed_2", reject, old+time.Hour, "mail")
	ignored("evt_old_ignored", old)
	// Payload cleared, claim and deliveries kept.
	settled("evt_mid_completed", success, mid, "ship", "mail")
	settled("evt_mid_failed", reject, mid, "ship")
	ignored("evt_mid_ignored", mid)
	// Kept whole.
	settled("evt_young", success, young, "ship")
	ignored("evt_young_ignored", young)
	// Processing claims are never touched, however old: one first seen and
	// last updated long ago, and one with a delivery settled long ago.
	b.claimed(t, "evt_stuck", "ship")
	b.backdate(t, "first_seen_at", "stripe", "evt_stuck", old)
	b.backdate(t, "updated_at", "stripe", "evt_stuck", old)
	b.claimed(t, "evt_half", "ship", "mail")
	b.record(t, key("evt_half", "ship"), success)
	b.backdate(t, "first_seen_at", "stripe", "evt_half", old)

	want := claim.PruneResult{Deleted: 4, PayloadsCleared: 3}

	t.Run("DryRunCountsAndChangesNothing", func(t *testing.T) {
		due, err := b.store.PruneDue(t.Context(), policy)
		require.NoError(t, err)
		require.Equal(t, want, due)
		for _, id := range []string{"evt_old_completed", "evt_mid_completed", "evt_stuck"} {
			exists, payload, _ := b.stored(t, id)
			require.True(t, exists && payload, id)
		}
	})

	t.Run("DeletesOldTerminalClaimsAndClearsPayloads", func(t *testing.T) {
		res, err := b.store.Prune(t.Context(), policy)
		require.NoError(t, err)
		require.Equal(t, want, res)

		for _, id := range []string{"evt_old_completed", "evt_old_failed", "evt_old_failed_2", "evt_old_ignored"} {
			exists, _, deliveries := b.stored(t, id)
			require.False(t, exists, id)
			require.Zero(t, deliveries, "%s: deliveries go with the claim", id)
		}
		for id, n := range map[string]int{"evt_mid_completed": 2, "evt_mid_failed": 1, "evt_mid_ignored": 0} {
			exists, payload, deliveries := b.stored(t, id)
			require.True(t, exists, id)
			require.False(t, payload, "%s: payload cleared", id)
			require.Equal(t, n, deliveries, id)
		}
		c, ds := b.get(t, "evt_mid_completed")
		require.Equal(t, claim.Completed, c.Status, "clearing changes nothing else")
		require.Equal(t, claim.DeliveryCompleted, ds["mail"].Status)
		for id, n := range map[string]int{"evt_young": 1, "evt_young_ignored": 0, "evt_stuck": 1, "evt_half": 2} {
			exists, payload, deliveries := b.stored(t, id)
			require.True(t, exists && payload, id)
			require.Equal(t, n, deliveries, id)
		}
		c, _ = b.get(t, "evt_half")
		require.Equal(t, claim.Processing, c.Status)
	})

	t.Run("NothingIsDueTwice", func(t *testing.T) {
		res, err := b.store.Prune(t.Context(), policy)
		require.NoError(t, err)
		require.Zero(t, res)
		due, err := b.store.PruneDue(t.Context(), policy)
		require.NoError(t, err)
		require.Zero(t, due)
	})

	t.Run("ClearedClaimIsDeletedWhenItsTimeComes", func(t *testing.T) {
		b.terminalAgo(t, "evt_mid_completed", old)
		res, err := b.store.Prune(t.Context(), policy)
		require.NoError(t, err)
		require.Equal(t, claim.PruneResult{Deleted: 1}, res)
	})

	t.Run("RefusesPayloadsOutlivingClaims", func(t *testing.T) {
		_, err := b.store.Prune(t.Context(), claim.Retention{Claims: time.Hour, Payloads: 2 * time.Hour})
		require.ErrorContains(t, err, "payloads")
	})
}

// seedTerminal commits n failed claims evt_<prefix>_<i> of route ship in one
// statement each for claims and deliveries, terminal for ago plus i seconds.
func (b *bundle) seedTerminal(t *testing.T, prefix string, n int, ago time.Duration) []string {
	t.Helper()
	ids := make([]string, n)
	opts := make([]*testfactory.ClaimOpts, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_%s_%d", prefix, i+1)
		opts[i] = &testfactory.ClaimOpts{EventID: ids[i], Status: claim.Failed, TerminalAt: testfactory.Ago(ago + time.Duration(i+1)*time.Second),
			Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed, LastError: "downstream answered 422"}}}
	}
	testfactory.Claims(t.Context(), t, b.db.Pool, opts)
	return ids
}

func (b *bundle) countClaims(t *testing.T, where string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE `+where).Scan(&n))
	return n
}

// Concurrent prunes split the work: no row is counted twice, none is
// missed, and none waits for or deadlocks with another.
func TestPruneConcurrent(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	const n, runs = 600, 6
	b.seedTerminal(t, "old", n, old)
	b.seedTerminal(t, "mid", n, mid)
	pool := concurrentPool(t, b.db, runs)
	store := newStore(t, pool)
	p := policy
	p.BatchSize = 7

	results := make([]claim.PruneResult, runs)
	errs := make([]error, runs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			<-start
			results[i], errs[i] = store.Prune(context.Background(), p)
		})
	}
	close(start)
	wg.Wait()
	var total claim.PruneResult
	for i := range runs {
		require.NoError(t, errs[i])
		total.Deleted += results[i].Deleted
		total.PayloadsCleared += results[i].PayloadsCleared
	}
	require.Equal(t, claim.PruneResult{Deleted: n, PayloadsCleared: n}, total)
	require.Zero(t, b.countClaims(t, `event_id LIKE 'evt_old_%'`))
	require.Equal(t, n, b.countClaims(t, `event_id LIKE 'evt_mid_%' AND payload IS NULL`))
	var deliveries int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries`).Scan(&deliveries))
	require.Equal(t, n, deliveries, "the deleted claims' deliveries went with them")
}

func TestPruneAndReopen(t *testing.T) {
	t.Parallel()

	// A reopen holds the claim's lock while it turns the claim back to
	// processing: prune passes it by without waiting, and after the reopen
	// commits the claim is processing and no longer due.
	t.Run("ClaimLockedByAReopenIsSkipped", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		ids := b.seedTerminal(t, "old", 3, old)
		ctx := t.Context()
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // committed below
		// What reopenTx does first, then its claim update.
		_, err = tx.Exec(ctx, `SELECT 1 FROM webhook_event_claims WHERE provider = 'stripe' AND event_id = $1 AND status = 'failed' FOR UPDATE`, ids[1])
		require.NoError(t, err)

		// Were prune to wait for the lock, it would wait for this test.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := b.store.Prune(pctx, policy)
		require.NoError(t, err)
		require.Equal(t, claim.PruneResult{Deleted: 2}, res)

		reopened := claim.EventKey{Provider: "stripe", EventID: ids[1]}
		testfactory.SetDelivery(ctx, t, tx, claim.Key{Provider: reopened.Provider, EventID: reopened.EventID},
			&testfactory.DeliveryOpts{Status: claim.DeliveryProcessing, UpdatedAt: testfactory.Now()})
		testfactory.SetClaim(ctx, t, tx, reopened, &testfactory.ClaimOpts{Status: claim.Processing, UpdatedAt: testfactory.Now()})
		require.NoError(t, tx.Commit(ctx))

		res, err = b.store.Prune(ctx, policy)
		require.NoError(t, err)
		require.Zero(t, res)
		exists, payload, deliveries := b.stored(t, ids[1])
		require.True(t, exists && payload)
		require.Equal(t, 1, deliveries)
	})

	// Prune and reopen race over the same claims from opposite ends. Each
	// claim either was reopened, and then it exists, processing, with its
	// delivery and a job; or was deleted, and then the reopen found nothing.
	// A round in which one side finished before the other began proves
	// little, so rounds repeat (on fresh claims) until one had both.
	t.Run("RaceEndsOneWayOrTheOther", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		pool := concurrentPool(t, b.db, 4)
		store := newStore(t, pool)
		p := policy
		p.BatchSize = 5
		jobs := 0
		for round := 1; ; round++ {
			if race(t, b, store, p, fmt.Sprintf("race%d", round), &jobs) {
				return
			}
			require.Less(t, round, 10, "prune and reopen never overlapped")
		}
	})
}

// race runs one round of TestPruneAndReopen's race on n fresh claims and
// reports whether both sides won some; jobs counts the reopens' jobs so far.
func race(t *testing.T, b *bundle, store *claim.Store, p claim.Retention, prefix string, jobs *int) bool {
	t.Helper()
	const n = 400
	ids := b.seedTerminal(t, prefix, n, old)
	reopened := make(map[string]bool, n)
	var deleted int
	var pruneErr, reopenErr error
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		// Repeated, so that it meets the reopens wherever they are.
		for range 50 {
			res, err := store.Prune(context.Background(), p)
			if err != nil {
				pruneErr = err
				return
			}
			deleted += res.Deleted
			if res.Deleted == 0 {
				return
			}
		}
	})
	wg.Go(func() {
		<-start
		// Newest first: the opposite end from prune's.
		for _, id := range slices.Backward(ids) {
			_, err := store.Reopen(context.Background(), "stripe", id, false)
			switch {
			case err == nil:
				reopened[id] = true
			case errors.Is(err, claim.ErrNotFound):
			default:
				reopenErr = err
				return
			}
		}
	})
	close(start)
	wg.Wait()
	require.NoError(t, pruneErr)
	require.NoError(t, reopenErr)
	require.Equal(t, n, deleted+len(reopened), "each claim went exactly one way")

	*jobs += len(reopened)
	// One job per reopen, none for a deleted claim.
	rivertest.RequireManyInserted(t.Context(), t, riverpgxv5.New(b.db.Pool), testfactory.DeliveryJobs(*jobs, nil))
	for _, id := range ids {
		exists, _, deliveries := b.stored(t, id)
		require.Equal(t, reopened[id], exists, id)
		if !exists {
			require.Zero(t, deliveries, id)
			continue
		}
		c, ds := b.get(t, id)
		require.Equal(t, claim.Processing, c.Status, id)
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status, id)
	}
	return deleted > 0 && len(reopened) > 0
}

// A redelivery that finds the claim it duplicates deleted by retention
// before it could read it (its insert saw the row, prune then deleted it)
// claims the event anew rather than failing.
func TestRedeliveryMeetsPrune(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	b.claimed(t, "evt_gone", "ship")
	b.record(t, key("evt_gone", "ship"), reject)
	b.terminalAgo(t, "evt_gone", old)
	b.requireJobs(t, args("evt_gone", "ship")...)

	// A prune batch has locked the claim.
	prune, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer prune.Rollback(ctx) //nolint:errcheck // committed below
	_, err = prune.Exec(ctx, `SELECT 1 FROM webhook_event_claims WHERE event_id = 'evt_gone' FOR UPDATE`)
	require.NoError(t, err)

	// The redelivery's insert sees the claim and does nothing; its reopen
	// then waits for the claim's lock.
	type outcome struct {
		res claim.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := testfactory.ClaimEvent(context.Background(), b.store, event("evt_gone"), []string{"ship"}, true)
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%')`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 10*time.Millisecond)
	_, err = prune.Exec(ctx, `DELETE FROM webhook_event_claims WHERE event_id = 'evt_gone'`)
	require.NoError(t, err)
	require.NoError(t, prune.Commit(ctx))

	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, claim.Claimed, got.res.Decision)
	c, ds := b.get(t, "evt_gone")
	require.Equal(t, claim.Processing, c.Status)
	require.Zero(t, ds["ship"].AttemptCount, "a new claim")
	b.requireJobs(t, args("evt_gone", "ship")...)
}

// A business key goes with the claim that holds it: once retention deleted
// the holder, a later event with the key gets the delivery.
func TestPruneFreesBusinessKeys(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	keyed := func(id string) claim.Event {
		ev := event(id)
		ev.BusinessKeys = []claim.BusinessKey{{Route: "ship", Key: `["order_1"]`}}
		return ev
	}
	res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_holder"), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)
	b.record(t, key("evt_holder", "ship"), success)
	b.terminalAgo(t, "evt_holder", old)

	pruned, err := b.store.Prune(t.Context(), policy)
	require.NoError(t, err)
	require.Equal(t, claim.PruneResult{Deleted: 1}, pruned)
	var keys int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_business_keys`).Scan(&keys))
	require.Zero(t, keys, "the key went with its claim")

	res, err = testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_later"), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, 1, res.Deliveries, "the key was free again")
	_, ds := b.get(t, "evt_later")
	require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
}
