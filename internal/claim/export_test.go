package claim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// exported runs Export with f (and payloads, when one is given) and
// returns copies of what it yielded.
func (b *bundle) exported(t *testing.T, f claim.Search, payloads ...bool) []claim.Exported {
	t.Helper()
	var out []claim.Exported
	require.NoError(t, b.store.Export(t.Context(), f, len(payloads) > 0 && payloads[0], func(e *claim.Exported) error {
		c := *e
		c.Deliveries = append([]claim.Delivery(nil), e.Deliveries...)
		c.Payload = append([]byte(nil), e.Payload...)
		if e.Payload == nil {
			c.Payload = nil
		}
		out = append(out, c)
		return nil
	}))
	return out
}

func exportedKeys(es []claim.Exported) []string {
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.Provider + "/" + e.EventID
	}
	return keys
}

func TestExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// First seen in this order, a minute apart, except that the three
	// evt_tie_* share one instant, as claims of one transaction do.
	b.claimAs(t, "stripe", "evt_a", "ship", "mail")
	b.record(t, key("evt_a", "ship"), success)
	b.record(t, key("evt_a", "mail"), reject)
	b.claimAs(t, "github", "evt_b", "ship")
	b.claimAs(t, "stripe", "evt_tie_3")
	b.claimAs(t, "stripe", "evt_tie_1", "ship")
	b.record(t, key("evt_tie_1", "ship"), success)
	b.claimAs(t, "github", "evt_tie_2")
	b.claimAs(t, "stripe", "evt_c", "ship")
	b.record(t, key("evt_c", "ship"), success)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := map[[2]string]time.Time{
		{"stripe", "evt_a"}: base, {"github", "evt_b"}: base.Add(time.Minute),
		{"stripe", "evt_tie_3"}: base.Add(2 * time.Minute), {"stripe", "evt_tie_1"}: base.Add(2 * time.Minute),
		{"github", "evt_tie_2"}: base.Add(2 * time.Minute), {"stripe", "evt_c"}: base.Add(3 * time.Minute),
	}
	for k, ts := range at {
		testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: k[0], EventID: k[1]}, &testfactory.ClaimOpts{FirstSeenAt: testfactory.At(ts)})
	}
	testfactory.SetClaim(t.Context(), t, b.conn, claim.EventKey{Provider: "stripe", EventID: "evt_c"}, &testfactory.ClaimOpts{ClearPayload: true})
	all := []string{"stripe/evt_a", "github/evt_b", "github/evt_tie_2", "stripe/evt_tie_1", "stripe/evt_tie_3", "stripe/evt_c"}

	for _, tt := range []struct {
		name   string
		filter claim.Search
		want   []string
	}{
		{"All", claim.Search{}, all},
		{"PagesSplitTies", claim.Search{Limit: 2}, all},
		{"PagesOfOne", claim.Search{Limit: 1}, all},
		{"Status", claim.Search{Status: claim.Completed, Limit: 1}, []string{"stripe/evt_tie_1", "stripe/evt_c"}},
		{"Provider", claim.Search{Provider: "github", Limit: 1}, []string{"github/evt_b", "github/evt_tie_2"}},
		{"SinceIncludes", claim.Search{Since: base.Add(2 * time.Minute)}, all[2:]},
		{"BeforeExcludes", claim.Search{Before: base.Add(2 * time.Minute)}, all[:2]},
		{"Window", claim.Search{Since: base.Add(time.Minute), Before: base.Add(3 * time.Minute), Limit: 2}, all[1:5]},
		{"Nothing", claim.Search{Since: base.Add(time.Hour)}, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, exportedKeys(b.exported(t, tt.filter)))
		})
	}

	t.Run("ClaimsCarryTheirDeliveriesAndPayloadOnlyWhenAsked", func(t *testing.T) {
		es := b.exported(t, claim.Search{}, true)
		require.Len(t, es, len(all))
		a := es[0]
		want, wantDs, err := b.store.Get(t.Context(), "stripe", "evt_a")
		require.NoError(t, err)
		require.Equal(t, want.FirstSeenAt.UTC(), a.FirstSeenAt.UTC())
		a.FirstSeenAt = want.FirstSeenAt
		require.Equal(t, want, a.Record, "the same fields as claims show")
		require.Len(t, a.Deliveries, 2)
		for i := range wantDs {
			require.Equal(t, wantDs[i].Route, a.Deliveries[i].Route)
			require.Equal(t, wantDs[i].Status, a.Deliveries[i].Status)
			require.Equal(t, wantDs[i].AttemptCount, a.Deliveries[i].AttemptCount)
			require.Equal(t, wantDs[i].LastError, a.Deliveries[i].LastError)
			require.True(t, wantDs[i].UpdatedAt.Equal(a.Deliveries[i].UpdatedAt), wantDs[i].Route)
			require.Equal(t, wantDs[i].CompletedAt == nil, a.Deliveries[i].CompletedAt == nil, wantDs[i].Route)
		}
		require.Equal(t, []string{"mail", "ship"}, []string{a.Deliveries[0].Route, a.Deliveries[1].Route})
		require.Equal(t, `{"id": "evt_a"}`, string(a.Payload))
		require.Empty(t, es[2].Deliveries, "an ignored claim has none")
		require.Nil(t, es[5].Payload, "cleared by retention")

		// A business key a delivery holds is exported beside it, as claims
		// show prints it.
		ev := event("evt_keyed")
		ev.BusinessKeys = []claim.BusinessKey{{Route: "ship", Key: `["in_1"]`}}
		_, err = testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship"}, true)
		require.NoError(t, err)
		keyed := b.exported(t, claim.Search{Since: time.Now().Add(-time.Minute)})
		require.Len(t, keyed, 1)
		require.Equal(t, `["in_1"]`, keyed[0].Deliveries[0].BusinessKey)

		// So is the result a route recorded when the delivery completed.
		b.record(t, key("evt_keyed", "ship"), claim.AttemptResult{
			Status: claim.DeliveryCompleted, Attempted: true, Result: []byte(`{"id":"shp_1"}`)})
		keyed = b.exported(t, claim.Search{Since: time.Now().Add(-time.Minute)})
		require.JSONEq(t, `{"id":"shp_1"}`, string(keyed[0].Deliveries[0].Result))
		for _, e := range b.exported(t, claim.Search{Before: time.Now().Add(-time.Minute)}) {
			for _, d := range e.Deliveries {
				require.Nil(t, d.Result, "no result recorded: none exported")
			}
		}

		for _, e := range b.exported(t, claim.Search{}) {
			require.Nil(t, e.Payload, e.EventID)
		}
	})
}
