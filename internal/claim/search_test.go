package claim_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

func TestReopenMatchingPagesThroughAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		id := fmt.Sprintf("evt_%d", i)
		b.claimAs(t, "stripe", id, "ship")
		b.record(t, claim.Key{Provider: "stripe", EventID: id, Route: "ship"}, reject)
	}
	b.claimAs(t, "github", "evt_other", "ship")
	b.record(t, claim.Key{Provider: "github", EventID: "evt_other", Route: "ship"}, reject)

	f := claim.Search{Status: claim.Failed, Provider: "stripe", Limit: 2}
	n, err := b.store.CountClaims(t.Context(), f)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	seen := map[claim.EventKey]bool{}
	matched, claims, deliveries, err := b.store.ReopenMatching(t.Context(), f, false, func(k claim.EventKey, n int) {
		require.False(t, seen[k], "reopened twice: %s", k)
		seen[k] = true
		require.Equal(t, 1, n)
	})
	require.NoError(t, err)
	require.Equal(t, [3]int{5, 5, 5}, [3]int{matched, claims, deliveries}, "pages of 2 reach all 5")
	left, err := b.store.SearchClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "github", left[0].Provider, "another provider's claim is left failed")
}
