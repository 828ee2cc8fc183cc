package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestStats pins what Stats counts: the claims first seen and the
// deliveries made (with their claims) within the window by provider and
// route, and the oldest processing ages whenever first seen. The test's
// transaction holds now() still, so the ages are exact.
func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)

	st, err := b.store.Stats(t.Context(), 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, claim.Stats{
		Claims:                map[string]map[claim.Status]int{},
		Deliveries:            map[string]map[claim.DeliveryStatus]int{},
		OldestClaimSeconds:    map[string]float64{},
		OldestDeliverySeconds: map[string]float64{},
	}, st, "nothing to count")

	put := func(provider string, status claim.Status, ago time.Duration, deliveries map[string]claim.DeliveryStatus) {
		opts := &testfactory.ClaimOpts{Provider: provider, Status: status, FirstSeenAt: testfactory.Ago(ago),
			Deliveries: map[string]*testfactory.DeliveryOpts{}}
		for route, s := range deliveries {
			opts.Deliveries[route] = &testfactory.DeliveryOpts{Status: s}
		}
		testfactory.Claim(t.Context(), t, b.conn, opts)
	}
	put("stripe", claim.Completed, time.Minute, map[string]claim.DeliveryStatus{"ship": claim.DeliveryCompleted, "mail": claim.DeliveryCompleted})
	put("stripe", claim.Failed, time.Hour, map[string]claim.DeliveryStatus{"ship": claim.DeliveryFailed, "mail": claim.DeliveryCompleted})
	put("stripe", claim.Processing, 3*time.Hour, map[string]claim.DeliveryStatus{"ship": claim.DeliveryProcessing, "mail": claim.DeliveryWaiting})
	put("github", claim.Ignored, 2*time.Minute, nil)
	// Outside a day's window: counted by a wider one, and the oldest
	// processing ages count them whatever the window.
	put("stripe", claim.Completed, 48*time.Hour, map[string]claim.DeliveryStatus{"ship": claim.DeliveryCompleted})
	put("github", claim.Processing, 72*time.Hour, map[string]claim.DeliveryStatus{"mail": claim.DeliveryProcessing})

	oldestClaims := map[string]float64{"stripe": 3 * 3600, "github": 72 * 3600}
	oldestDeliveries := map[string]float64{"ship": 3 * 3600, "mail": 72 * 3600}
	st, err = b.store.Stats(t.Context(), 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, claim.Stats{
		Claims: map[string]map[claim.Status]int{
			"stripe": {claim.Completed: 1, claim.Failed: 1, claim.Processing: 1},
			"github": {claim.Ignored: 1},
		},
		Deliveries: map[string]map[claim.DeliveryStatus]int{
			"ship": {claim.DeliveryCompleted: 1, claim.DeliveryFailed: 1, claim.DeliveryProcessing: 1},
			"mail": {claim.DeliveryCompleted: 2, claim.DeliveryWaiting: 1},
		},
		OldestClaimSeconds:    oldestClaims,
		OldestDeliverySeconds: oldestDeliveries,
	}, st)

	st, err = b.store.Stats(t.Context(), 96*time.Hour)
	require.NoError(t, err)
	require.Equal(t, claim.Stats{
		Claims: map[string]map[claim.Status]int{
			"stripe": {claim.Completed: 2, claim.Failed: 1, claim.Processing: 1},
			"github": {claim.Ignored: 1, claim.Processing: 1},
		},
		Deliveries: map[string]map[claim.DeliveryStatus]int{
			"ship": {claim.DeliveryCompleted: 2, claim.DeliveryFailed: 1, claim.DeliveryProcessing: 1},
			"mail": {claim.DeliveryCompleted: 2, claim.DeliveryWaiting: 1, claim.DeliveryProcessing: 1},
		},
		OldestClaimSeconds:    oldestClaims,
		OldestDeliverySeconds: oldestDeliveries,
	}, st, "a wider window")
}

// TestChainedDeliveriesCountWithTheirClaim: the stats and the activity
// count deliveries by when they were made, which is when their claim was
// first seen, a route that runs after another included: the claim
// statement makes its delivery then, waiting, and the predecessor's
// completion, in a later transaction, only releases it. So a chained
// delivery is counted in its claim's interval, never in the one its
// predecessor completed in. Over a database of the test's own, so that
// each step commits at its own now().
func TestChainedDeliveriesCountWithTheirClaim(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	_, err := testfactory.ClaimEvent(t.Context(), b.store, chained("evt_chain", shipThenMail), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	b.end(t, key("evt_chain", "ship"), released)
	_, ds := b.statuses(t, "evt_chain")
	require.Equal(t, claim.DeliveryProcessing, ds["mail"], "ship's completion released mail")

	// One interval of a microsecond (the clock's resolution) from the
	// instant the claim was first seen.
	acts, err := b.store.RouteActivity(t.Context(), b.seen(t, "evt_chain"), time.Microsecond, 1)
	require.NoError(t, err)
	require.Equal(t, []claim.Activity{
		{Route: "mail", Interval: 0, Accepted: 1},
		{Route: "ship", Interval: 0, Accepted: 1, Delivered: 1},
	}, acts)
}
