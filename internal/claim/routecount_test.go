package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestCountFailedByRoute counts the failed claims a search matches by the
// route they failed on, most first; a claim failed on two routes counts
// on both, and a delivery that did not fail on none.
func TestCountFailedByRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		b.claimAs(t, "stripe", id, "ship", "mail")
		b.record(t, key(id, "ship"), reject)
	}
	b.record(t, key("evt_1", "mail"), reject)
	b.record(t, key("evt_2", "mail"), success)
	b.record(t, key("evt_3", "mail"), success)
	b.claimAs(t, "github", "evt_gh", "ship")
	b.record(t, claim.Key{Provider: "github", EventID: "evt_gh", Route: "ship"}, reject)

	got, err := b.store.CountFailedByRoute(t.Context(), claim.Search{Status: claim.Failed, Provider: "stripe"})
	require.NoError(t, err)
	require.Equal(t, []claim.RouteCount{{Route: "ship", Claims: 3}, {Route: "mail", Claims: 1}}, got)
	got, err = b.store.CountFailedByRoute(t.Context(), claim.Search{Status: claim.Failed, Route: "mail"})
	require.NoError(t, err)
	require.Equal(t, []claim.RouteCount{{Route: "ship", Claims: 3}, {Route: "mail", Claims: 1}}, got,
		"the route filter keeps claims with a delivery to it; all their failed routes count")
}

// TestSearchChangedSince keeps the claims changed at or after a time: what
// a bulk retry reopened, followed from its confirmation.
func TestSearchChangedSince(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimAs(t, "stripe", "evt_old", "ship")
	b.claimAs(t, "stripe", "evt_new", "ship")
	b.backdate(t, "updated_at", "stripe", "evt_old", time.Hour)
	got, err := b.store.SearchClaims(t.Context(), claim.Search{ChangedSince: time.Now().Add(-time.Minute)})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "evt_new", got[0].EventID)
}
