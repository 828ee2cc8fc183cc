package claim_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestLoadDeliveryColumns: a delivery comes with every column of its
// own and of its claim, and a key of another route, event or provider
// gets none.
func TestLoadDeliveryColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_1", "ship", "mail")
	b.record(t, key("evt_1", "ship"), retry)

	missing := []claim.Key{key("evt_1", "ledger"), key("evt_2", "ship"), {Provider: "github", EventID: "evt_1", Route: "ship"}}
	ds, err := b.store.LoadDeliveries(t.Context(), append([]claim.Key{missing[0], key("evt_1", "ship"), missing[1], key("evt_1", "mail")}, missing[2]))
	require.NoError(t, err)
	require.Len(t, ds, 5)
	for _, i := range []int{0, 2, 4} {
		require.Nil(t, ds[i], "key %d has no delivery", i)
	}
	require.Equal(t, key("evt_1", "mail"), ds[3].Key())
	d := ds[1]
	c, _ := b.get(t, "evt_1")
	require.Equal(t, key("evt_1", "ship"), claim.Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route})
	require.Equal(t, claim.DeliveryProcessing, d.Status)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, retry.Error, d.LastError)
	require.Nil(t, d.CompletedAt)
	require.Equal(t, "invoice.paid", d.EventType)
	require.Equal(t, "in_1", d.ObjectID)
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, []byte(`{"id": "evt_1"}`), d.Payload)
	require.True(t, d.ClaimFirstSeen.Equal(c.FirstSeenAt))

}

// TestRecordAttempt's subtests share a database; each works on events of
// its own.
func TestRecordAttempt(t *testing.T) {
	t.Parallel()
	b := setupDB(t)

	t.Run("SuccessCompletesDeliveryThenClaimWhenAllAre", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_success", "ship", "mail")
		_, before := b.get(t, "evt_success")

		b.record(t, key("evt_success", "ship"), success)
		c, ds := b.get(t, "evt_success")
		require.Equal(t, claim.DeliveryCompleted, ds["ship"].Status)
		require.NotNil(t, ds["ship"].CompletedAt)
		require.Equal(t, 1, ds["ship"].AttemptCount)
		require.True(t, ds["ship"].UpdatedAt.After(before["ship"].UpdatedAt))
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		require.Equal(t, claim.Processing, c.Status, "mail is still processing")
		require.Nil(t, c.CompletedAt)
		require.Equal(t, 1, c.AttemptCount)

		b.record(t, key("evt_success", "mail"), success)
		c, ds = b.get(t, "evt_success")
		require.Equal(t, claim.DeliveryCompleted, ds["mail"].Status)
		require.Equal(t, claim.Completed, c.Status)
		require.NotNil(t, c.CompletedAt)
		require.Equal(t, 2, c.AttemptCount)
		require.Empty(t, c.LastError)
	})

	t.Run("ResultIsStoredWithTheCompletionOnly", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_result", "ship", "mail")

		withResult := claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "HTTP 503", Result: []byte(`"ignored"`)}
		b.record(t, key("evt_result", "ship"), withResult)
		_, ds := b.get(t, "evt_result")
		require.Nil(t, ds["ship"].Result, "an attempt that did not complete stores no result")

		withResult = claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true, Result: []byte(`{"id":"shp_1","n":2}`)}
		b.record(t, key("evt_result", "ship"), withResult)
		b.record(t, key("evt_result", "mail"), success)
		c, ds := b.get(t, "evt_result")
		require.Equal(t, claim.Completed, c.Status)
		require.JSONEq(t, `{"id":"shp_1","n":2}`, string(ds["ship"].Result))
		require.Nil(t, ds["mail"].Result, "a route without a result program stores none")

		_, err := b.store.Reopen(t.Context(), "stripe", "evt_result", true)
		require.NoError(t, err)
		_, ds = b.get(t, "evt_result")
		require.Nil(t, ds["ship"].Result, "a reopened delivery's next completion records its own")
	})

	t.Run("RetryableFailureStaysProcessing", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_retry", "ship", "mail")

		b.record(t, key("evt_retry", "ship"), retry)
		c, ds := b.get(t, "evt_retry")
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
		require.Equal(t, 1, ds["ship"].AttemptCount)
		require.Equal(t, retry.Error, ds["ship"].LastError)
		require.Nil(t, ds["ship"].CompletedAt)
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, 1, c.AttemptCount)
		require.Equal(t, retry.Error, c.LastError)

		timeout := claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "timeout after 10s"}
		b.record(t, key("evt_retry", "ship"), timeout)
		c, ds = b.get(t, "evt_retry")
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
		require.Equal(t, 2, ds["ship"].AttemptCount)
		require.Equal(t, timeout.Error, ds["ship"].LastError)
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, 2, c.AttemptCount)
		require.Equal(t, timeout.Error, c.LastError)
		require.Zero(t, ds["mail"].AttemptCount)
		require.Empty(t, ds["mail"].LastError, "a delivery's error stays its own")
	})

	t.Run("PermanentFailureFailsClaimOnceNoneProcessing", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_fail", "ship", "mail", "ledger")

		b.record(t, key("evt_fail", "ship"), reject)
		c, ds := b.get(t, "evt_fail")
		require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
		require.Nil(t, ds["ship"].CompletedAt)
		require.Equal(t, reject.Error, ds["ship"].LastError)
		require.Equal(t, claim.Processing, c.Status, "mail and ledger are still processing")
		require.Equal(t, reject.Error, c.LastError)

		b.record(t, key("evt_fail", "mail"), success)
		c, _ = b.get(t, "evt_fail")
		require.Equal(t, claim.Processing, c.Status, "ledger is still processing")

		b.record(t, key("evt_fail", "ledger"), success)
		c, ds = b.get(t, "evt_fail")
		require.Equal(t, claim.Failed, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Equal(t, 3, c.AttemptCount)
		require.Equal(t, claim.DeliveryCompleted, ds["mail"].Status)
		require.Equal(t, claim.DeliveryCompleted, ds["ledger"].Status)
	})

	t.Run("PermanentFailureOfTheLastDeliveryFailsClaim", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_fail_last", "ship", "mail")
		b.record(t, key("evt_fail_last", "ship"), success)
		b.record(t, key("evt_fail_last", "mail"), reject)

		c, _ := b.get(t, "evt_fail_last")
		require.Equal(t, claim.Failed, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Equal(t, reject.Error, c.LastError)
	})

	t.Run("ClaimAttemptCountSumsDeliveries", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_sum", "ship", "mail")
		for _, step := range []struct {
			route string
			r     claim.AttemptResult
		}{
			{"ship", retry}, {"mail", retry}, {"ship", retry}, {"ship", success}, {"mail", reject},
		} {
			b.record(t, key("evt_sum", step.route), step.r)
		}

		c, ds := b.get(t, "evt_sum")
		require.Equal(t, 3, ds["ship"].AttemptCount)
		require.Equal(t, 2, ds["mail"].AttemptCount)
		require.Equal(t, 5, c.AttemptCount)
		require.Equal(t, claim.Failed, c.Status)
	})

	t.Run("NotAttemptedDoesNotCount", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_unattempted", "ship")
		gone := claim.AttemptResult{Status: claim.DeliveryFailed, Error: `route "ship" no longer exists`}

		b.record(t, key("evt_unattempted", "ship"), gone)
		c, ds := b.get(t, "evt_unattempted")
		require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
		require.Zero(t, ds["ship"].AttemptCount)
		require.Equal(t, gone.Error, ds["ship"].LastError)
		require.Equal(t, claim.Failed, c.Status)
		require.Zero(t, c.AttemptCount)
		require.Equal(t, gone.Error, c.LastError)
	})

	t.Run("DeliveryNoLongerProcessingIsConflict", func(t *testing.T) {
		t.Parallel()
		b.claimed(t, "evt_settled", "ship", "mail")
		b.record(t, key("evt_settled", "ship"), success)
		b.record(t, key("evt_settled", "mail"), reject)
		before, beforeDs := b.get(t, "evt_settled")

		for _, k := range []claim.Key{key("evt_settled", "ship"), key("evt_settled", "mail")} {
			for _, r := range []claim.AttemptResult{success, retry, reject} {
				tx, err := b.conn.Begin(t.Context())
				require.NoError(t, err)
				err = newStore(t, tx).RecordAttempt(t.Context(), k, r)
				require.ErrorIs(t, err, claim.ErrConflict, "%s %+v", k, r)
				require.NoError(t, tx.Commit(t.Context()), "a conflict leaves the transaction usable")
			}
		}
		after, afterDs := b.get(t, "evt_settled")
		require.Equal(t, before, after)
		require.Equal(t, beforeDs, afterDs)
	})

	t.Run("UnknownClaimIsNotFound", func(t *testing.T) {
		t.Parallel()
		err := b.store.RecordAttempt(t.Context(), key("evt_unknown", "ship"), success)
		require.ErrorIs(t, err, claim.ErrNotFound)
	})

	// The second of two concurrent attempts of one claim waits for the
	// first's lock on the claim row, so its roll-up sees the first's
	// committed delivery.
	t.Run("SiblingWaitsForClaimLock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b.claimed(t, "evt_lock", "ship", "mail")

		first, err := b.conn.Begin(ctx)
		require.NoError(t, err)
		defer first.Rollback(ctx) //nolint:errcheck // no-op after commit
		second, err := b.conn.Begin(ctx)
		require.NoError(t, err)
		defer second.Rollback(ctx) //nolint:errcheck // no-op after commit
		var secondPID uint32
		require.NoError(t, second.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&secondPID))

		require.NoError(t, newStore(t, first).RecordAttempt(ctx, key("evt_lock", "ship"), success))
		done := make(chan error, 1)
		secondStore := newStore(t, second)
		go func() { done <- secondStore.RecordAttempt(ctx, key("evt_lock", "mail"), success) }()

		require.Eventually(t, func() bool {
			var waiting bool
			err := b.conn.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false)
FROM pg_stat_activity WHERE pid = $1`, secondPID).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 5*time.Millisecond, "the second attempt should wait for the claim row")
		select {
		case err := <-done:
			t.Fatalf("second attempt returned before the first committed: %v", err)
		default:
		}

		require.NoError(t, first.Commit(ctx))
		require.NoError(t, <-done)
		require.NoError(t, second.Commit(ctx))

		c, _ := b.get(t, "evt_lock")
		require.Equal(t, claim.Completed, c.Status)
		require.Equal(t, 2, c.AttemptCount)
	})

	// Two deliveries of one claim settle at the same instant, each in its
	// own transaction: whichever order the lock picks, the claim ends in
	// the status of both.
	t.Run("SiblingsSettlingAtOnceRollUpRight", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name       string
			ship, mail claim.AttemptResult
			want       claim.Status
			repeat     int
		}{
			{name: "both_complete", ship: success, mail: success, want: claim.Completed, repeat: 20},
			{name: "one_fails", ship: reject, mail: success, want: claim.Failed, repeat: 10},
		} {
			for i := range tt.repeat {
				id := fmt.Sprintf("evt_race_%s_%d", tt.name, i)
				b.claimed(t, id, "ship", "mail")
				settleAtOnce(t, b, map[claim.Key]claim.AttemptResult{
					key(id, "ship"): tt.ship,
					key(id, "mail"): tt.mail,
				})
				c, _ := b.get(t, id)
				require.Equal(t, tt.want, c.Status, id)
				require.Equal(t, 2, c.AttemptCount, id)
			}
		}
	})
}

// settleAtOnce begins one transaction per delivery, then records every
// outcome and commits, all released together.
func settleAtOnce(t *testing.T, b *bundle, outcomes map[claim.Key]claim.AttemptResult) {
	t.Helper()
	ctx := t.Context()
	txs := make(map[claim.Key]pgx.Tx, len(outcomes))
	stores := make(map[claim.Key]*claim.Store, len(outcomes))
	for k := range outcomes {
		tx, err := b.conn.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		txs[k], stores[k] = tx, newStore(t, tx)
	}
	start := make(chan struct{})
	errs := make(chan error, len(outcomes))
	var wg sync.WaitGroup
	for k, r := range outcomes {
		wg.Go(func() {
			<-start
			if err := stores[k].RecordAttempt(ctx, k, r); err != nil {
				errs <- err
				return
			}
			errs <- txs[k].Commit(ctx)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestReopen's subtests share a database and run in order, each on events
// of its own.
func TestReopen(t *testing.T) {
	t.Parallel()
	b := setupDB(t)

	t.Run("FailedClaimReopensItsFailedDeliveries", func(t *testing.T) {
		b.claimed(t, "evt_failed", "ship", "mail", "ledger")
		b.record(t, key("evt_failed", "ship"), success)
		b.record(t, key("evt_failed", "mail"), reject)
		b.record(t, key("evt_failed", "ledger"), reject)

		n, err := b.store.Reopen(t.Context(), "stripe", "evt_failed", false)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		c, ds := b.get(t, "evt_failed")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliveryCompleted, ds["ship"].Status)
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		require.Equal(t, claim.DeliveryProcessing, ds["ledger"].Status)
		b.requireJobs(t, args("evt_failed", "ship", "mail", "ledger", "mail", "ledger")...)

		// Attempts continue across the reopen.
		b.record(t, key("evt_failed", "mail"), success)
		b.record(t, key("evt_failed", "ledger"), success)
		c, ds = b.get(t, "evt_failed")
		require.Equal(t, claim.Completed, c.Status)
		require.Equal(t, 5, c.AttemptCount)
		require.Equal(t, 2, ds["mail"].AttemptCount)
	})

	t.Run("CompletedClaimNeedsForce", func(t *testing.T) {
		b.claimed(t, "evt_completed", "ship", "mail")
		b.record(t, key("evt_completed", "ship"), success)
		b.record(t, key("evt_completed", "mail"), success)
		before, beforeDs := b.get(t, "evt_completed")
		require.Equal(t, claim.Completed, before.Status)

		_, err := b.store.Reopen(t.Context(), "stripe", "evt_completed", false)
		require.ErrorIs(t, err, claim.ErrConflict)
		after, afterDs := b.get(t, "evt_completed")
		require.Equal(t, before, after)
		require.Equal(t, beforeDs, afterDs)
		b.requireJobs(t, args("evt_completed", "ship", "mail")...)

		n, err := b.store.Reopen(t.Context(), "stripe", "evt_completed", true)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		c, ds := b.get(t, "evt_completed")
		require.Equal(t, claim.Processing, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Equal(t, 2, c.AttemptCount)
		for _, r := range []string{"ship", "mail"} {
			require.Equal(t, claim.DeliveryProcessing, ds[r].Status, r)
			require.Nil(t, ds[r].CompletedAt, r)
			require.Equal(t, 1, ds[r].AttemptCount, r)
		}
		b.requireJobs(t, args("evt_completed", "ship", "mail")...)
	})

	t.Run("ForceRerunsEveryDeliveryOfAFailedClaim", func(t *testing.T) {
		b.claimed(t, "evt_force", "ship", "mail")
		b.record(t, key("evt_force", "ship"), success)
		b.record(t, key("evt_force", "mail"), reject)

		n, err := b.store.Reopen(t.Context(), "stripe", "evt_force", true)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		c, ds := b.get(t, "evt_force")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
		require.Nil(t, ds["ship"].CompletedAt)
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		b.requireJobs(t, args("evt_force", "ship", "mail", "ship", "mail")...)
	})

	t.Run("ProcessingOrIgnoredClaimIsConflict", func(t *testing.T) {
		b.claimed(t, "evt_processing", "ship")
		res, err := testfactory.ClaimEvent(t.Context(), b.store, event("evt_nothing"), nil, true)
		require.NoError(t, err)
		require.Equal(t, claim.ClaimedIgnored, res.Decision)

		for _, id := range []string{"evt_processing", "evt_nothing"} {
			for _, force := range []bool{false, true} {
				n, err := b.store.Reopen(t.Context(), "stripe", id, force)
				require.ErrorIs(t, err, claim.ErrConflict, "%s force=%v", id, force)
				require.Zero(t, n)
			}
		}
		c, _ := b.get(t, "evt_nothing")
		require.Equal(t, claim.Ignored, c.Status)
		b.requireJobs(t, args("evt_processing", "ship")...)
	})

	t.Run("FailedClaimWithNothingToReopenIsLeftAsItIs", func(t *testing.T) {
		// Not reachable through roll-ups, but a claim must never be left
		// processing with no delivery to finish it.
		b.claimed(t, "evt_hollow", "ship")
		b.record(t, key("evt_hollow", "ship"), success)
		testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: "stripe", EventID: "evt_hollow"},
			&testfactory.ClaimOpts{Status: claim.Failed})

		_, err := b.store.Reopen(t.Context(), "stripe", "evt_hollow", false)
		require.ErrorIs(t, err, claim.ErrConflict)
		res, err := testfactory.ClaimEvent(t.Context(), b.store, event("evt_hollow"), []string{"ship"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Duplicate, res.Decision)
		require.Equal(t, claim.Failed, res.Status)
		c, _ := b.get(t, "evt_hollow")
		require.Equal(t, claim.Failed, c.Status)
		b.requireJobs(t, args("evt_hollow", "ship")...)
	})

	t.Run("UnknownClaimIsNotFound", func(t *testing.T) {
		for _, k := range [][2]string{{"stripe", "evt_unknown"}, {"github", "evt_failed"}} {
			_, err := b.store.Reopen(t.Context(), k[0], k[1], true)
			require.ErrorIs(t, err, claim.ErrNotFound, k)
			require.NotErrorIs(t, err, claim.ErrConflict)
		}
		b.requireJobs(t)
	})

	t.Run("ConcurrentReopensActOnce", func(t *testing.T) {
		b.claimed(t, "evt_concurrent", "ship")
		b.record(t, key("evt_concurrent", "ship"), reject)

		const n = 10
		reopened := make([]int, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				reopened[i], errs[i] = b.store.Reopen(context.Background(), "stripe", "evt_concurrent", false)
			})
		}
		close(start)
		wg.Wait()

		var won, conflicts int
		for i := range n {
			switch {
			case errs[i] == nil:
				require.Equal(t, 1, reopened[i])
				won++
			default:
				require.ErrorIs(t, errs[i], claim.ErrConflict)
				conflicts++
			}
		}
		require.Equal(t, 1, won)
		require.Equal(t, n-1, conflicts)
		b.requireJobs(t, args("evt_concurrent", "ship", "ship")...)
	})
}

// cancelAfterBatch runs everything on the real database, and cancels the
// context of the call once its batch has run: the statements after it then
// fail as they would when the caller gives up or the connection drops.
type cancelAfterBatch struct {
	claim.DB
	cancel context.CancelFunc
}

func (c cancelAfterBatch) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return batchThenCancel{c.DB.SendBatch(ctx, b), c.cancel}
}

type batchThenCancel struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (b batchThenCancel) Close() error {
	err := b.BatchResults.Close()
	b.cancel()
	return err
}

// When a delivery is not recorded, RecordAttempt reads whether its claim
// exists to tell ErrNotFound from ErrConflict; a failure of that read is
// its error, not a claim that does not exist.
func TestRecordAttemptNamesAFailedExistenceCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_1", "ship")
	b.record(t, key("evt_1", "ship"), success)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store := claim.NewStore(cancelAfterBatch{DB: b.conn, cancel: cancel}, nil, nil)
	err := store.RecordAttempt(ctx, key("evt_1", "ship"), reject)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, claim.ErrNotFound)
	require.NotErrorIs(t, err, claim.ErrConflict)
}

// TestRecordAttemptsBatch settles deliveries of several claims in one call
// (EndJobs, with no jobs to end), siblings included, and skips the one that
// is no longer processing.
func TestRecordAttemptsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := testfactory.ClaimEvent(ctx, b.store, event("evt_b1"), []string{"ship", "mail"}, false)
	require.NoError(t, err)
	_, err = testfactory.ClaimEvent(ctx, b.store, event("evt_b2"), []string{"ship"}, false)
	require.NoError(t, err)
	_, err = testfactory.ClaimEvent(ctx, b.store, event("evt_b3"), []string{"ship"}, false)
	require.NoError(t, err)
	testfactory.SetDelivery(ctx, t, b.conn, key("evt_b3", "ship"), &testfactory.DeliveryOpts{Status: claim.DeliveryFailed})

	tx, err := b.conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	_, recorded, err := newStore(t, tx).EndJobs(ctx, []claim.Attempt{
		{Key: key("evt_b1", "ship"), Result: claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}},
		{Key: key("evt_b2", "ship"), Result: claim.AttemptResult{Status: claim.DeliveryFailed, Attempted: true, Error: "HTTP 400 Bad Request"}},
		{Key: key("evt_b1", "mail"), Result: claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}},
		{Key: key("evt_b3", "ship"), Result: claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}},
	}, nil)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, false}, recorded)
	require.NoError(t, tx.Commit(ctx))

	for id, want := range map[string]struct {
		status   string
		attempts int
	}{"evt_b1": {"completed", 2}, "evt_b2": {"failed", 1}, "evt_b3": {"processing", 0}} {
		var status string
		var attempts int
		require.NoError(t, b.conn.QueryRow(ctx, `SELECT status, attempt_count FROM webhook_event_claims WHERE event_id = $1`, id).
			Scan(&status, &attempts))
		require.Equal(t, want.status, status, id)
		require.Equal(t, want.attempts, attempts, id)
	}
}

// TestLoadDeliveries reads several deliveries in one query, in the order
// asked, with nil for a key that has none.
func TestLoadDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_l1", "ship", "mail")
	b.claimed(t, "evt_l2", "ship")
	keys := []claim.Key{key("evt_l2", "ship"), key("evt_missing", "ship"), key("evt_l1", "mail"), key("evt_l1", "ship")}
	ds, err := b.store.LoadDeliveries(t.Context(), keys)
	require.NoError(t, err)
	require.Len(t, ds, len(keys))
	require.Nil(t, ds[1])
	for _, i := range []int{0, 2, 3} {
		require.NotNil(t, ds[i], keys[i])
		require.Equal(t, keys[i].EventID, ds[i].EventID)
		require.Equal(t, keys[i].Route, ds[i].Route)
		require.Equal(t, claim.DeliveryProcessing, ds[i].Status)
		require.Equal(t, event(keys[i].EventID).Payload, ds[i].Payload)
	}
}
