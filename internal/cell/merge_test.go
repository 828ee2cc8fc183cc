package cell_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
)

// TestMergeClaims: pages merge newest first, a tie in time broken by
// provider then event id (descending), cut to the limit from the newest
// end, or from the oldest for a page before a position; each claim says
// which page it came from.
func TestMergeClaims(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	rec := func(min int, provider, id string) claim.Record {
		return claim.Record{FirstSeenAt: at.Add(time.Duration(min) * time.Minute), Provider: provider, EventID: id}
	}
	eu := []claim.Record{rec(9, "stripe", "a"), rec(5, "stripe", "b"), rec(5, "stripe", "a"), rec(1, "stripe", "c")}
	us := []claim.Record{rec(7, "github", "x"), rec(5, "github", "z"), rec(2, "github", "y")}
	ids := func(rs []claim.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Provider+"/"+r.EventID)
		}
		return out
	}
	merged, from := cell.MergeClaims([][]claim.Record{eu, us}, 5, false)
	require.Equal(t, []string{"stripe/a", "github/x", "stripe/b", "stripe/a", "github/z"}, ids(merged))
	require.Equal(t, []int{0, 1, 0, 0, 1}, from)
	merged, _ = cell.MergeClaims([][]claim.Record{eu, us}, 3, true)
	require.Equal(t, []string{"github/z", "github/y", "stripe/c"}, ids(merged), "the nearest to the position, still newest first")
	merged, _ = cell.MergeClaims([][]claim.Record{eu, nil}, 10, false)
	require.Equal(t, ids(eu), ids(merged))
}

// TestMergeAudit: audit rows merge newest first, by time then id.
func TestMergeAudit(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	eu := []claim.AuditRow{{ID: 9, At: at.Add(3 * time.Second)}, {ID: 8, At: at}}
	us := []claim.AuditRow{{ID: 2, At: at.Add(2 * time.Second)}, {ID: 10, At: at}}
	var got []int64
	for _, r := range cell.MergeAudit([][]claim.AuditRow{eu, us}, 3) {
		got = append(got, r.ID)
	}
	require.Equal(t, []int64{9, 2, 10}, got)
}
