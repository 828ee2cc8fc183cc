package claim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
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

// Failed claims that cannot be reopened (their deliveries failed for want
// of a business key) do not end the run: the claims on later pages are
// still reopened.
func TestReopenMatchingPastClaimsThatStayFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const stuck = 501 // more than one page
	opts := make([]*testfactory.ClaimOpts, stuck)
	for i := range opts {
		opts[i] = &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_stuck_%d", i+1), Status: claim.Failed,
			UpdatedAt: testfactory.Ago(time.Hour + time.Duration(i+1)*time.Second),
			Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed,
				LastError: "business key: field id is missing", BusinessKeyMissing: true}}}
	}
	testfactory.Claims(t.Context(), t, b.conn, opts)
	b.claimAs(t, "stripe", "evt_older", "ship")
	b.record(t, key("evt_older", "ship"), reject)
	b.backdate(t, "first_seen_at", "stripe", "evt_older", 2*time.Hour) // last, newest first

	var got []claim.EventKey
	matched, claims, deliveries, err := b.store.ReopenMatching(t.Context(), claim.Search{Status: claim.Failed}, false,
		func(k claim.EventKey, _ int) { got = append(got, k) })
	require.NoError(t, err)
	require.Equal(t, stuck+1, matched)
	require.Equal(t, []claim.EventKey{{Provider: "stripe", EventID: "evt_older"}}, got)
	require.Equal(t, [2]int{1, 1}, [2]int{claims, deliveries})
	c, _ := b.get(t, "evt_older")
	require.Equal(t, claim.Processing, c.Status)
}

// An event id substring matches anywhere in the id, its LIKE wildcards
// taken literally; a bounded count stops at its bound.
func TestSearchSubstringAndBoundedCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"evt_pay_0001_a", "pay_0001", "evt_pay_00010", "evt_pay_0002", "evt_pay%0001"} {
		b.claimAs(t, "stripe", id, "ship")
	}
	ids := func(f claim.Search) []string {
		t.Helper()
		cs, err := b.store.SearchClaims(t.Context(), f)
		require.NoError(t, err)
		var out []string
		for _, c := range cs {
			out = append(out, c.EventID)
		}
		return out
	}
	require.ElementsMatch(t, []string{"evt_pay_0001_a", "pay_0001", "evt_pay_00010"}, ids(claim.Search{EventIDContains: "pay_0001"}))
	require.Equal(t, []string{"evt_pay%0001"}, ids(claim.Search{EventIDContains: "%0001"}), "% is no wildcard")
	// Shorter than a trigram: tested id by id, the same matches.
	require.ElementsMatch(t, []string{"evt_pay_00010"}, ids(claim.Search{EventIDContains: "10"}))
	require.ElementsMatch(t, []string{"evt_pay%0001"}, ids(claim.Search{EventIDContains: "%"}), "% is no wildcard")

	n, err := b.store.CountClaimsUpTo(t.Context(), claim.Search{EventIDContains: "pay"}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, n, "stops at the bound")
	n, err = b.store.CountClaimsUpTo(t.Context(), claim.Search{EventIDContains: "0002"}, 3)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// A page before a position holds the claims nearest to it, newest first:
// paging forward then back lands on the same pages.
func TestSearchPagesBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 7 {
		id := fmt.Sprintf("evt_%d", i)
		b.claimAs(t, "stripe", id, "ship")
		b.backdate(t, "first_seen_at", "stripe", id, time.Duration(10-i)*time.Minute)
	}
	page := func(f claim.Search) []string {
		t.Helper()
		f.Limit = 3
		cs, err := b.store.SearchClaims(t.Context(), f)
		require.NoError(t, err)
		var out []string
		for _, c := range cs {
			out = append(out, c.EventID)
		}
		return out
	}
	first := page(claim.Search{})
	require.Equal(t, []string{"evt_6", "evt_5", "evt_4"}, first)
	second := page(claim.Search{After: &claim.Position{Provider: "stripe", EventID: "evt_4", FirstSeenAt: b.seen(t, "evt_4")}})
	require.Equal(t, []string{"evt_3", "evt_2", "evt_1"}, second)
	back := page(claim.Search{Newer: &claim.Position{Provider: "stripe", EventID: "evt_3", FirstSeenAt: b.seen(t, "evt_3")}})
	require.Equal(t, first, back)
}

// seen is a stripe claim's first_seen_at.
func (b *bundle) seen(t *testing.T, id string) time.Time {
	t.Helper()
	c, _ := b.get(t, id)
	return c.FirstSeenAt
}

// The overview's activity: per route and interval, the deliveries made
// then (with the claims first seen then), and how many of them were
// delivered or failed.
func TestRouteActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, id := range []string{"evt_a", "evt_b", "evt_c"} {
		b.claimAs(t, "stripe", id, "ship")
		b.backdate(t, "first_seen_at", "stripe", id, time.Duration(90-i*40)*time.Minute) // 90, 50, 10 minutes ago
	}
	b.record(t, key("evt_a", "ship"), success)
	b.record(t, key("evt_b", "ship"), reject)
	since := time.Now().Add(-2 * time.Hour)
	acts, err := b.store.RouteActivity(t.Context(), since, time.Hour, 2)
	require.NoError(t, err)
	require.Equal(t, []claim.Activity{
		{Route: "ship", Interval: 0, Accepted: 1, Delivered: 1},
		{Route: "ship", Interval: 1, Accepted: 2, Failed: 1},
	}, acts)
	counts, err := b.store.StatusCounts(t.Context(), since)
	require.NoError(t, err)
	require.Equal(t, map[claim.Status]int{claim.Completed: 1, claim.Failed: 1, claim.Processing: 1}, counts)
}
