package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestStats pins what Stats counts: the claims and deliveries first seen
// within the window by provider and route, and the oldest processing ages
// whenever first seen. The test's transaction holds now() still, so the
// ages are exact.
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
