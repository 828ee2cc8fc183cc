package claim_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// keyed returns stripe event id carrying business keys: route, key pairs.
func keyed(id string, pairs ...string) claim.Event {
	ev := event(id)
	for i := 0; i < len(pairs); i += 2 {
		ev.BusinessKeys = append(ev.BusinessKeys, claim.BusinessKey{Route: pairs[i], Key: pairs[i+1]})
	}
	return ev
}

const orderKey = `["invoice.paid","in_1"]`

// TestBusinessKey's subtests share a database and run in order, each on
// business keys of its own.
func TestBusinessKey(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("LaterClaimWithTheKeyIsSkippedNamingTheHolder", func(t *testing.T) {
		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_first", "ship", orderKey), []string{"ship", "mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 2}, res)

		res, err = testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_second", "ship", orderKey), []string{"ship", "mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Skipped: []string{"ship"}}, res)

		c, ds := b.get(t, "evt_bk_second")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
		require.Equal(t, "business key is held by stripe/evt_bk_first", ds["ship"].LastError)
		require.Zero(t, ds["ship"].AttemptCount)
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status, "a route without a key is unaffected")
		require.Empty(t, ds["ship"].BusinessKey, "a skipped delivery holds no key")
		_, firstDs := b.get(t, "evt_bk_first")
		require.Equal(t, orderKey, firstDs["ship"].BusinessKey)
		require.Empty(t, firstDs["mail"].BusinessKey)
		b.requireJobs(t, append(args("evt_bk_first", "ship", "mail"), args("evt_bk_second", "mail")...)...)

		// Skipped counts as done: the claim completes with its other delivery.
		b.record(t, key("evt_bk_second", "mail"), success)
		c, _ = b.get(t, "evt_bk_second")
		require.Equal(t, claim.Completed, c.Status)
		require.NotNil(t, c.CompletedAt)
	})

	t.Run("AllSkippedIsIgnoredWithoutJob", func(t *testing.T) {
		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_third", "ship", orderKey), []string{"ship"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ship"}}, res)
		c, ds := b.get(t, "evt_bk_third")
		require.Equal(t, claim.Ignored, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Equal(t, "business key is held by stripe/evt_bk_first", c.LastError)
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
		b.requireJobs(t)

		// Neither retry nor force overrides a business key.
		for _, force := range []bool{false, true} {
			_, err = b.store.Reopen(t.Context(), "stripe", "evt_bk_third", force)
			require.ErrorIs(t, err, claim.ErrConflict)
		}
		_, ds = b.get(t, "evt_bk_third")
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
		b.requireJobs(t)
	})

	t.Run("KeysAreScopedToTheRoute", func(t *testing.T) {
		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_mail", "mail", orderKey), []string{"mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1}, res)
		b.requireJobs(t, args("evt_bk_mail", "mail")...)
	})

	t.Run("DuplicateOfTheHolderChangesNothing", func(t *testing.T) {
		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_first", "ship", orderKey), []string{"ship", "mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Duplicate, res.Decision)
		require.Nil(t, res.Skipped)
		var holders []string
		rows, err := b.conn.Query(t.Context(), `SELECT event_id FROM webhook_business_keys WHERE route = 'ship'`)
		require.NoError(t, err)
		holders, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"evt_bk_first"}, holders)
		b.requireJobs(t)
	})

	t.Run("MissingKeyFailsTheDeliveryNamingTheField", func(t *testing.T) {
		ev := event("evt_bk_missing")
		ev.BusinessKeys = []claim.BusinessKey{{Route: "ship", Missing: "business key: json:data.object.id is missing"}}
		res, err := testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship", "mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Unkeyed: []string{"ship"}}, res)
		c, ds := b.get(t, "evt_bk_missing")
		require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
		require.Equal(t, "business key: json:data.object.id is missing", ds["ship"].LastError)
		require.Zero(t, ds["ship"].AttemptCount)
		require.Equal(t, "business key: json:data.object.id is missing", c.LastError)
		b.requireJobs(t, args("evt_bk_missing", "mail")...)

		b.record(t, key("evt_bk_missing", "mail"), success)
		c, _ = b.get(t, "evt_bk_missing")
		require.Equal(t, claim.Failed, c.Status, "a delivery failed for its key fails the claim")

		// A retry would send it without its key: it is not reopened.
		_, err = b.store.Reopen(t.Context(), "stripe", "evt_bk_missing", false)
		require.ErrorIs(t, err, claim.ErrConflict)
		res, err = testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship", "mail"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Duplicate, Status: claim.Failed}, res)
		b.requireJobs(t)
	})

	t.Run("OnlyRouteMissingItsKeyFailsTheClaimAtOnce", func(t *testing.T) {
		ev := event("evt_bk_missing_only")
		ev.BusinessKeys = []claim.BusinessKey{{Route: "ship", Missing: "business key: header:X-Order is missing"}}
		res, err := testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Failed, Unkeyed: []string{"ship"}}, res)
		c, _ := b.get(t, "evt_bk_missing_only")
		require.Equal(t, claim.Failed, c.Status)
		failed, err := b.store.SearchClaims(t.Context(), claim.Search{Status: claim.Failed})
		require.NoError(t, err)
		require.Contains(t, failed, c, "claims list --status failed shows it")
		b.requireJobs(t)
	})

	t.Run("FailedHolderRetriedIsDeliveredSkippedStaysSkipped", func(t *testing.T) {
		const k = `["invoice.paid","in_retry"]`
		_, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_holder", "ship", k), []string{"ship"}, true)
		require.NoError(t, err)
		_, err = testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_skipped", "ship", k), []string{"ship"}, true)
		require.NoError(t, err)
		b.record(t, key("evt_bk_holder", "ship"), reject)
		c, _ := b.get(t, "evt_bk_holder")
		require.Equal(t, claim.Failed, c.Status)

		n, err := b.store.Reopen(t.Context(), "stripe", "evt_bk_holder", false)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the holder keeps its key while failed")
		b.requireJobs(t, args("evt_bk_holder", "ship", "ship")...)
		_, ds := b.get(t, "evt_bk_skipped")
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
	})

	t.Run("DeletingTheHolderFreesTheKey", func(t *testing.T) {
		const k = `["invoice.paid","in_deleted"]`
		_, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_old", "ship", k), []string{"ship"}, true)
		require.NoError(t, err)
		testfactory.DeleteClaim(t.Context(), t, b.conn, claim.EventKey{Provider: "stripe", EventID: "evt_bk_old"})
		var left int
		require.NoError(t, b.conn.QueryRow(t.Context(),
			`SELECT count(*) FROM webhook_business_keys WHERE event_id = 'evt_bk_old'`).Scan(&left))
		require.Zero(t, left, "the key went with its claim")

		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_late", "ship", k), []string{"ship"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1}, res,
			"a very late event with the key of a deleted claim is delivered")
		for _, id := range []string{"evt_bk_old", "evt_bk_late"} {
			testfactory.DeleteJobs(t.Context(), t, b.conn, testfactory.JobWhere{Delivery: key(id, "")})
		}
	})

	t.Run("LongValuesAreKeysToo", func(t *testing.T) {
		long := fmt.Sprintf(`["%0100000d"]`, 1)
		_, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_long1", "ship", long), []string{"ship"}, true)
		require.NoError(t, err)
		res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bk_long2", "ship", long), []string{"ship"}, true)
		require.NoError(t, err)
		require.Equal(t, []string{"ship"}, res.Skipped)
		b.requireJobs(t, args("evt_bk_long1", "ship")...)
	})
}

func TestBusinessKeyConcurrent(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	const n = 50
	results := make([]claim.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = testfactory.ClaimEvent(t.Context(), b.store, keyed(fmt.Sprintf("evt_race_%d", i), "ship", orderKey),
				[]string{"ship", "mail"}, true)
		})
	}
	wg.Wait()
	holder := -1
	for i, res := range results {
		require.NoError(t, errs[i])
		require.Equal(t, claim.Claimed, res.Decision)
		if res.Skipped == nil {
			require.Equal(t, -1, holder, "two holders: %d and %d", holder, i)
			holder = i
		}
	}
	require.NotEqual(t, -1, holder, "one event holds the key")
	want := fmt.Sprintf("business key is held by stripe/evt_race_%d", holder)
	var skipped int
	require.NoError(t, b.conn.QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries
WHERE route = 'ship' AND status = 'skipped' AND last_error = $1`, want).Scan(&skipped))
	require.Equal(t, n-1, skipped, "every other event names the holder")
}
