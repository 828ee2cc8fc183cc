package claim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// claimAs claims event id of provider for routes.
func (b *bundle) claimAs(t *testing.T, provider, id string, routes ...string) {
	t.Helper()
	ev := event(id)
	ev.Provider = provider
	_, err := testfactory.ClaimEvent(t.Context(), b.store, ev, routes, true)
	require.NoError(t, err)
}

// backdate moves a claim's column (first_seen_at or updated_at) ago into the
// past, so that orderings do not rest on clock resolution.
func (b *bundle) backdate(t *testing.T, column, provider, id string, ago time.Duration) {
	t.Helper()
	opts := &testfactory.ClaimOpts{UpdatedAt: testfactory.Ago(ago)}
	if column == "first_seen_at" {
		opts = &testfactory.ClaimOpts{FirstSeenAt: testfactory.Ago(ago)}
	}
	testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: provider, EventID: id}, opts)
}

func keysOf(claims []claim.Record) []string {
	keys := make([]string, len(claims))
	for i, c := range claims {
		keys[i] = c.Provider + "/" + c.EventID
	}
	return keys
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One claim of each status over two providers, first seen a minute
	// apart: stripe/evt_a oldest, stripe/evt_e newest.
	b.claimAs(t, "stripe", "evt_a", "ship")
	b.claimAs(t, "stripe", "evt_b", "ship")
	b.record(t, key("evt_b", "ship"), success)
	b.claimAs(t, "github", "evt_c", "ship")
	b.record(t, claim.Key{Provider: "github", EventID: "evt_c", Route: "ship"}, reject)
	b.claimAs(t, "github", "evt_d")
	b.claimAs(t, "stripe", "evt_e")
	for i, k := range [][2]string{{"stripe", "evt_a"}, {"stripe", "evt_b"}, {"github", "evt_c"}, {"github", "evt_d"}, {"stripe", "evt_e"}} {
		b.backdate(t, "first_seen_at", k[0], k[1], time.Duration(5-i)*time.Minute)
	}

	for _, tt := range []struct {
		name   string
		filter claim.Search
		want   []string
	}{
		{"All", claim.Search{}, []string{"stripe/evt_e", "github/evt_d", "github/evt_c", "stripe/evt_b", "stripe/evt_a"}},
		{"Processing", claim.Search{Status: claim.Processing}, []string{"stripe/evt_a"}},
		{"Completed", claim.Search{Status: claim.Completed}, []string{"stripe/evt_b"}},
		{"Failed", claim.Search{Status: claim.Failed}, []string{"github/evt_c"}},
		{"Ignored", claim.Search{Status: claim.Ignored}, []string{"stripe/evt_e", "github/evt_d"}},
		{"Provider", claim.Search{Provider: "github"}, []string{"github/evt_d", "github/evt_c"}},
		{"ProviderAndStatus", claim.Search{Provider: "stripe", Status: claim.Ignored}, []string{"stripe/evt_e"}},
		{"Limit", claim.Search{Limit: 2}, []string{"stripe/evt_e", "github/evt_d"}},
		{"LimitAfterFilter", claim.Search{Provider: "stripe", Limit: 2}, []string{"stripe/evt_e", "stripe/evt_b"}},
		{"UnknownProvider", claim.Search{Provider: "shopify"}, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claims, err := b.store.SearchClaims(t.Context(), tt.filter)
			require.NoError(t, err)
			require.Equal(t, tt.want, keysOf(claims))
		})
	}

	t.Run("Fields", func(t *testing.T) {
		claims, err := b.store.SearchClaims(t.Context(), claim.Search{Provider: "github", Status: claim.Failed})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		c := claims[0]
		require.Equal(t, "invoice.paid", c.EventType)
		require.Equal(t, "in_1", c.ObjectID)
		require.Equal(t, 1, c.AttemptCount)
		require.Equal(t, reject.Error, c.LastError)
		require.Nil(t, c.CompletedAt)
		require.WithinDuration(t, time.Now().Add(-3*time.Minute), c.FirstSeenAt, time.Minute)

		claims, err = b.store.SearchClaims(t.Context(), claim.Search{Status: claim.Completed})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		require.NotNil(t, claims[0].CompletedAt)
	})

	t.Run("DefaultLimitIs50", func(t *testing.T) {
		for i := range 50 {
			b.claimAs(t, "stripe", fmt.Sprintf("evt_bulk_%02d", i))
		}
		claims, err := b.store.SearchClaims(t.Context(), claim.Search{})
		require.NoError(t, err)
		require.Len(t, claims, 50)
		require.NotContains(t, keysOf(claims), "stripe/evt_a", "the oldest is past the default limit")

		claims, err = b.store.SearchClaims(t.Context(), claim.Search{Limit: 100})
		require.NoError(t, err)
		require.Len(t, claims, 55)
	})
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_1", "ship", "ledger", "mail")
	b.record(t, key("evt_1", "mail"), retry)
	b.record(t, key("evt_1", "ship"), success)

	c, ds, err := b.store.Get(t.Context(), "stripe", "evt_1")
	require.NoError(t, err)
	require.Equal(t, "stripe", c.Provider)
	require.Equal(t, "evt_1", c.EventID)
	require.Equal(t, claim.Processing, c.Status)
	require.Equal(t, 2, c.AttemptCount)
	require.Equal(t, retry.Error, c.LastError)

	routes := make([]string, len(ds))
	for i, d := range ds {
		routes[i] = d.Route
		require.Equal(t, "stripe", d.Provider)
		require.Equal(t, "evt_1", d.EventID)
		require.Equal(t, "invoice.paid", d.EventType)
		require.Nil(t, d.Payload, "Get leaves the payload out")
	}
	require.Equal(t, []string{"ledger", "mail", "ship"}, routes)
	require.Equal(t, claim.DeliveryProcessing, ds[0].Status)
	require.Equal(t, claim.DeliveryProcessing, ds[1].Status)
	require.Equal(t, 1, ds[1].AttemptCount)
	require.Equal(t, retry.Error, ds[1].LastError)
	require.Equal(t, claim.DeliveryCompleted, ds[2].Status)
	require.NotNil(t, ds[2].CompletedAt)

	for _, k := range [][2]string{{"stripe", "evt_2"}, {"github", "evt_1"}} {
		_, ds, err := b.store.Get(t.Context(), k[0], k[1])
		require.ErrorIs(t, err, claim.ErrNotFound, k)
		require.Nil(t, ds)
	}
}

func TestConflictStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_processing", "ship")
	b.claimAs(t, "stripe", "evt_ignored")
	for _, tt := range []struct {
		id   string
		want claim.Status
	}{
		{"evt_processing", claim.Processing},
		{"evt_ignored", claim.Ignored},
	} {
		_, err := b.store.Reopen(t.Context(), "stripe", tt.id, false)
		require.ErrorIs(t, err, claim.ErrConflict)
		status, ok := claim.ConflictStatus(err)
		require.True(t, ok, tt.id)
		require.Equal(t, tt.want, status, tt.id)
	}
	_, err := b.store.Reopen(t.Context(), "stripe", "evt_missing", false)
	require.ErrorIs(t, err, claim.ErrNotFound)
	_, ok := claim.ConflictStatus(err)
	require.False(t, ok)
}

func TestBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)

	routes := []string{"ship", "mail"}
	backlog, err := b.store.Backlog(t.Context(), routes)
	require.NoError(t, err)
	require.Equal(t, claim.BacklogCounts{Waiting: map[string]int{}}, backlog)

	b.claimed(t, "evt_old", "ship")
	b.claimed(t, "evt_new", "ship", "mail")
	b.claimed(t, "evt_done", "ship")
	b.record(t, key("evt_done", "ship"), success)
	b.claimed(t, "evt_failed", "ship")
	b.record(t, key("evt_failed", "ship"), reject)
	b.claimAs(t, "stripe", "evt_ignored")
	// Only processing claims count, however old the others are.
	b.backdate(t, "first_seen_at", "stripe", "evt_old", time.Hour)
	b.backdate(t, "first_seen_at", "stripe", "evt_done", 2*time.Hour)
	b.backdate(t, "first_seen_at", "stripe", "evt_failed", 3*time.Hour)
	b.backdate(t, "first_seen_at", "stripe", "evt_ignored", 4*time.Hour)

	// Waiting deliveries count by route, for the routes asked about.
	for _, id := range []string{"evt_chain1", "evt_chain2"} {
		_, err := testfactory.ClaimEvent(t.Context(), b.store, chained(id, map[string][]string{"mail": {"ship"}, "ledger": {"ship"}}),
			[]string{"ship", "mail", "ledger"}, true)
		require.NoError(t, err)
		b.backdate(t, "first_seen_at", "stripe", id, time.Minute)
	}

	backlog, err = b.store.Backlog(t.Context(), routes)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"mail": 2}, backlog.Waiting)
	require.Equal(t, 4, backlog.Processing)
	require.GreaterOrEqual(t, backlog.OldestAge, time.Hour)
	require.Less(t, backlog.OldestAge, time.Hour+time.Minute)
}
