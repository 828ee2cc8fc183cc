package cell

import (
	"slices"
	"strings"
	"sync"

	"github.com/hookgate/hookgate/internal/claim"
)

// Reading across cells: each cell answers the same question (the same
// filter, cursor and limit), and its answers are merged here in the order
// one cell would have given them. Positions name a claim's provider, and a
// provider lives in one cell, so a position never ties across cells and a
// cursor handed out by a merged page is valid in every cell.

// Each runs read(i) for i in [0, n) at once and returns each one's error,
// by i.
func Each(n int, read func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = read(i) })
	}
	wg.Wait()
	return errs
}

// NewestFirst compares positions in SearchClaims' newest-first order:
// negative when a comes first (Export's oldest-first order is its
// reverse). Provider and event id compare byte by byte, as Postgres does
// under the C and C.UTF-8 collations; under another collation, claims of
// two cells first seen in the same microsecond may sort otherwise than
// each cell sorts them, which only matters for a cursor at that tie.
func NewestFirst(a, b claim.Position) int {
	if c := b.FirstSeenAt.Compare(a.FirstSeenAt); c != 0 {
		return c
	}
	if c := strings.Compare(b.Provider, a.Provider); c != 0 {
		return c
	}
	return strings.Compare(b.EventID, a.EventID)
}

// MergeClaims merges pages, each newest first as SearchClaims answers,
// into one page newest first of at most limit claims: the limit newest,
// or, when nearest is set (a page before a position, claim.Search.Newer),
// the limit oldest, those nearest to that position. from[i] is the index
// of the page merged[i] came from.
func MergeClaims(pages [][]claim.Record, limit int, nearest bool) (merged []claim.Record, from []int) {
	type tagged struct {
		r    claim.Record
		page int
	}
	var all []tagged
	for i, p := range pages {
		for _, r := range p {
			all = append(all, tagged{r, i})
		}
	}
	slices.SortStableFunc(all, func(a, b tagged) int { return NewestFirst(a.r.Position(), b.r.Position()) })
	if len(all) > limit {
		if nearest {
			all = all[len(all)-limit:]
		} else {
			all = all[:limit]
		}
	}
	merged, from = make([]claim.Record, len(all)), make([]int, len(all))
	for i, t := range all {
		merged[i], from[i] = t.r, t.page
	}
	return merged, from
}

// MergeAudit merges pages of audit rows, each newest first as
// claim.Store's AuditRows answers, into one newest first of at most limit
// rows.
func MergeAudit(pages [][]claim.AuditRow, limit int) []claim.AuditRow {
	var all []claim.AuditRow
	for _, p := range pages {
		all = append(all, p...)
	}
	slices.SortStableFunc(all, func(a, b claim.AuditRow) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmpInt(b.ID, a.ID)
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
