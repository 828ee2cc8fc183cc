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
	_, err := b.store.Claim(t.Context(), ev, routes, true)
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
		filter claim.Filter
		want   []string
	}{
		{"All", claim.Filter{}, []string{"stripe/evt_e", "github/evt_d", "github/evt_c", "stripe/evt_b", "stripe/evt_a"}},
		{"Processing", claim.Filter{Status: claim.Processing}, []string{"stripe/evt_a"}},
		{"Completed", claim.Filter{Status: claim.Completed}, []string{"stripe/evt_b"}},
		{"Failed", claim.Filter{Status: claim.Failed}, []string{"github/evt_c"}},
		{"Ignored", claim.Filter{Status: claim.Ignored}, []string{"stripe/evt_e", "github/evt_d"}},
		{"Provider", claim.Filter{Provider: "github"}, []string{"github/evt_d", "github/evt_c"}},
		{"ProviderAndStatus", claim.Filter{Provider: "stripe", Status: claim.Ignored}, []string{"stripe/evt_e"}},
		{"Limit", claim.Filter{Limit: 2}, []string{"stripe/evt_e", "github/evt_d"}},
		{"LimitAfterFilter", claim.Filter{Provider: "stripe", Limit: 2}, []string{"stripe/evt_e", "stripe/evt_b"}},
		{"UnknownProvider", claim.Filter{Provider: "shopify"}, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claims, err := b.store.List(t.Context(), tt.filter)
			require.NoError(t, err)
			require.Equal(t, tt.want, keysOf(claims))
		})
	}

	t.Run("Fields", func(t *testing.T) {
		claims, err := b.store.List(t.Context(), claim.Filter{Provider: "github", Status: claim.Failed})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		c := claims[0]
		require.Equal(t, "invoice.paid", c.EventType)
		require.Equal(t, "in_1", c.ObjectID)
		require.Equal(t, 1, c.AttemptCount)
		require.Equal(t, reject.Error, c.LastError)
		require.Nil(t, c.CompletedAt)
		require.WithinDuration(t, time.Now().Add(-3*time.Minute), c.FirstSeenAt, time.Minute)

		claims, err = b.store.List(t.Context(), claim.Filter{Status: claim.Completed})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		require.NotNil(t, claims[0].CompletedAt)
	})

	t.Run("DefaultLimitIs50", func(t *testing.T) {
		for i := range 50 {
			b.claimAs(t, "stripe", fmt.Sprintf("evt_bulk_%02d", i))
		}
		claims, err := b.store.List(t.Context(), claim.Filter{})
		require.NoError(t, err)
		require.Len(t, claims, 50)
		require.NotContains(t, keysOf(claims), "stripe/evt_a", "the oldest is past the default limit")

		claims, err = b.store.List(t.Context(), claim.Filter{Limit: 100})
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

func TestFailedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, k := range [][2]string{{"stripe", "evt_1"}, {"github", "evt_2"}, {"stripe", "evt_3"}} {
		b.claimAs(t, k[0], k[1], "ship")
		b.record(t, claim.Key{Provider: k[0], EventID: k[1], Route: "ship"}, reject)
	}
	b.claimed(t, "evt_completed", "ship")
	b.record(t, key("evt_completed", "ship"), success)
	b.claimed(t, "evt_processing", "ship")
	b.claimAs(t, "stripe", "evt_ignored")
	// Failed longest ago first: evt_3, then evt_1, then evt_2.
	b.backdate(t, "updated_at", "stripe", "evt_3", 3*time.Minute)
	b.backdate(t, "updated_at", "stripe", "evt_1", 2*time.Minute)
	b.backdate(t, "updated_at", "github", "evt_2", time.Minute)

	type ek = claim.EventKey
	for _, tt := range []struct {
		name     string
		provider string
		limit    int
		want     []claim.EventKey
	}{
		{"All", "", 10, []claim.EventKey{{"stripe", "evt_3"}, {"stripe", "evt_1"}, {"github", "evt_2"}}},
		{"Provider", "stripe", 10, []claim.EventKey{{"stripe", "evt_3"}, {"stripe", "evt_1"}}},
		{"Limit", "", 2, []claim.EventKey{{"stripe", "evt_3"}, {"stripe", "evt_1"}}},
		{"UnknownProvider", "shopify", 10, []claim.EventKey{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := b.store.FailedKeys(t.Context(), tt.provider, tt.limit)
			require.NoError(t, err)
			require.Equal(t, tt.want, keys)
		})
	}

	t.Run("ReopenedIsNoLongerFailed", func(t *testing.T) {
		_, err := b.store.Reopen(t.Context(), "stripe", "evt_3", false)
		require.NoError(t, err)
		keys, err := b.store.FailedKeys(t.Context(), "", 10)
		require.NoError(t, err)
		require.Equal(t, []claim.EventKey{ek{"stripe", "evt_1"}, ek{"github", "evt_2"}}, keys)
	})
}

func TestReopenFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, k := range [][2]string{{"stripe", "evt_1"}, {"github", "evt_2"}, {"stripe", "evt_3"}} {
		b.claimAs(t, k[0], k[1], "ship", "mail")
		b.record(t, claim.Key{Provider: k[0], EventID: k[1], Route: "ship"}, reject)
		b.record(t, claim.Key{Provider: k[0], EventID: k[1], Route: "mail"}, success)
	}
	b.claimed(t, "evt_processing", "ship")
	b.backdate(t, "updated_at", "stripe", "evt_3", time.Minute)

	var got []claim.EventKey
	claims, deliveries, err := b.store.ReopenFailed(t.Context(), "stripe", false, func(k claim.EventKey, n int) {
		require.Equal(t, 1, n, k)
		got = append(got, k)
	})
	require.NoError(t, err)
	require.Equal(t, 2, claims)
	require.Equal(t, 2, deliveries)
	require.Equal(t, []claim.EventKey{{"stripe", "evt_3"}, {"stripe", "evt_1"}}, got, "oldest failure first")
	c, ds := b.get(t, "evt_1")
	require.Equal(t, claim.Processing, c.Status)
	require.Equal(t, claim.DeliveryCompleted, ds["mail"].Status, "without force a completed delivery stays as it is")
	keys, err := b.store.FailedKeys(t.Context(), "", 10)
	require.NoError(t, err)
	require.Equal(t, []claim.EventKey{{"github", "evt_2"}}, keys, "another provider's claim is left failed")

	t.Run("NothingFailed", func(t *testing.T) {
		claims, deliveries, err := b.store.ReopenFailed(t.Context(), "stripe", false, nil)
		require.NoError(t, err)
		require.Zero(t, claims)
		require.Zero(t, deliveries)
	})

	t.Run("ForceReopensCompletedDeliveriesToo", func(t *testing.T) {
		claims, deliveries, err := b.store.ReopenFailed(t.Context(), "github", true, nil)
		require.NoError(t, err)
		require.Equal(t, 1, claims)
		require.Equal(t, 2, deliveries)
	})
}

// A page of failed claims that cannot be reopened (their deliveries failed
// for want of a business key, and keep their updated_at) does not end the
// run: the claims after it are still reopened.
func TestReopenFailedPastClaimsThatStayFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const stuck = 501 // more than one page of FailedKeys
	b.exec(t, `INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, updated_at, attempt_count)
SELECT 'stripe', 'evt_stuck_' || i, 'invoice.paid', 'failed', '{}'::bytea, now() - make_interval(secs => 3600 + i), 0
FROM generate_series(1, $1) AS i`, stuck)
	b.exec(t, `INSERT INTO webhook_deliveries (provider, event_id, route, status, last_error, business_key_missing)
SELECT 'stripe', 'evt_stuck_' || i, 'ship', 'failed', 'business key: field id is missing', true
FROM generate_series(1, $1) AS i`, stuck)
	b.claimAs(t, "stripe", "evt_newer", "ship")
	b.record(t, key("evt_newer", "ship"), reject)

	var got []claim.EventKey
	claims, deliveries, err := b.store.ReopenFailed(t.Context(), "", false, func(k claim.EventKey, _ int) {
		got = append(got, k)
	})
	require.NoError(t, err)
	require.Equal(t, []claim.EventKey{{"stripe", "evt_newer"}}, got)
	require.Equal(t, 1, claims)
	require.Equal(t, 1, deliveries)
	c, _ := b.get(t, "evt_newer")
	require.Equal(t, claim.Processing, c.Status)
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
	require.Equal(t, claim.Backlog{Waiting: map[string]int{}}, backlog)

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
		_, err := b.store.Claim(t.Context(), chained(id, map[string][]string{"mail": {"ship"}, "ledger": {"ship"}}),
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
