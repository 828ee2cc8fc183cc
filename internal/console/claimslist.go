package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// countBound is how far the claims list counts its matches: past it the
// page says "10,000+", so a broad filter costs a bounded count.
const countBound = 10_000

// defaultCountTime bounds the list's count (Options.CountTimeout): a
// filter tested claim by claim (a route, say) may read many claims to
// count to the bound, and the page is not held back for it.
const defaultCountTime = 300 * time.Millisecond

// notCounted is what the list says when counting took too long.
const notCounted = "many"

// matched is how many claims f matches, as the list shows it.
func (s *Server) matched(ctx context.Context, f claim.Search) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, s.countTime)
	defer cancel()
	n, err := s.store.CountClaimsUpTo(cctx, f, countBound+1)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return notCounted, nil
	}
	if err != nil {
		return "", err
	}
	if n > countBound {
		return thousands(countBound) + "+", nil
	}
	return thousands(n), nil
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// filterQuery is q without its paging.
func filterQuery(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range filterKeys {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	if v := q.Get("limit"); v != "" {
		out.Set("limit", v)
	}
	return out
}

// pageLinks are the links to the first, previous and next pages of the
// list q asked for.
func pageLinks(q url.Values, pg claimsPageOf) (first, prev, next string) {
	base := filterQuery(q)
	link := func(cursor string) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if len(v) == 0 {
			return "/console/claims"
		}
		return "/console/claims?" + v.Encode()
	}
	if pg.prev != "" {
		first, prev = link(""), link(pg.prev)
	}
	if pg.next != "" {
		next = link(pg.next)
	}
	return first, prev, next
}

// filterValues are the filters of f as the list's parameters take them,
// its times as RFC 3339: what a confirmation form carries, so that the
// claims confirmed are those counted, whatever "1h" means a minute later.
func filterValues(f claim.Search) url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("status", string(f.Status))
	set("provider", f.Provider)
	set("route", f.Route)
	set("type", f.Type)
	set("event_id", f.EventIDPrefix)
	if f.EventIDContains != "" {
		v.Set("event_id", "*"+f.EventIDContains+"*")
	}
	set("business_key", f.BusinessKey)
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Before.IsZero() {
		v.Set("before", f.Before.UTC().Format(time.RFC3339Nano))
	}
	if !f.ChangedSince.IsZero() {
		v.Set("changed_since", f.ChangedSince.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// claimsPageOf is one page of the claims list and the cursors of the pages
// after and before it ("" when there is none).
type claimsPageOf struct {
	claims     []claimView
	next, prev string
}

// listClaims reads one page of claims with their deliveries, and the
// cursors of the next and previous pages. A page before the first that
// would not be full is the first page.
func (s *Server) listClaims(ctx context.Context, f claim.Search) (claimsPageOf, error) {
	limit := f.Limit
	f.Limit++ // one more, to know whether a next (or previous) page exists
	claims, err := s.store.SearchClaims(ctx, f)
	if err != nil {
		return claimsPageOf{}, err
	}
	var pg claimsPageOf
	if f.Newer != nil && len(claims) <= limit {
		// Back at the start: the first page, as full as it can be.
		f.Newer = nil
		if claims, err = s.store.SearchClaims(ctx, f); err != nil {
			return claimsPageOf{}, err
		}
	}
	switch {
	case f.Newer != nil: // a full page before, and more before it
		claims = claims[1:]
		pg.prev = encodePrevCursor(claims[0].Position())
		pg.next = encodeCursor(claims[len(claims)-1].Position())
	case len(claims) > limit:
		claims = claims[:limit]
		pg.next = encodeCursor(claims[limit-1].Position())
	}
	if f.After != nil && len(claims) > 0 {
		pg.prev = encodePrevCursor(claims[0].Position())
	}
	views, err := s.claimViews(ctx, claims)
	pg.claims = views
	return pg, err
}

// claimViews reads the deliveries of claims, in one query.
func (s *Server) claimViews(ctx context.Context, claims []claim.Record) ([]claimView, error) {
	keys := make([]claim.EventKey, len(claims))
	for i, c := range claims {
		keys[i] = claim.EventKey{Provider: c.Provider, EventID: c.EventID}
	}
	ds, err := s.store.DeliveriesOf(ctx, keys)
	if err != nil {
		return nil, err
	}
	views := make([]claimView, len(claims))
	for i, c := range claims {
		views[i] = claimView{Record: withoutAnswers(c), Deliveries: s.deliveryViews(ds[keys[i]])}
	}
	return views, nil
}

type claimsPage struct {
	Statuses []string
	Filter   map[string]string
	Claims   []claimView
	// First, Prev and Next are the links to those pages; "" where there
	// is none (First: on the first page).
	First, Prev, Next string
	// Matched counts the claims the filters match, up to countBound.
	Matched string
	// BulkRetry is the bulk retry's link for these filters; "" where
	// they do not allow one (a status other than failed).
	BulkRetry string
	// NoneFailed says the filters could match failed claims but match
	// none, so there is nothing to retry in bulk.
	NoneFailed bool
	// Follow is the link to what a bulk retry just reopened; "" when the
	// list does not follow one.
	Follow string
	Error  string
}

func (s *Server) handleClaimsPage(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	// An empty field of the filter form means no filter.
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" || k == "bulk_matched" || k == "bulk_reopened" || k == "bulk_as_of" {
			q.Del(k)
		}
	}
	d := claimsPage{Statuses: []string{"failed", "processing", "completed", "ignored"}, Filter: map[string]string{}}
	for _, k := range filterKeys {
		d.Filter[k] = q.Get(k)
	}
	f, err := parseList(q)
	if err != nil {
		var br *badRequest
		if !errors.As(err, &br) {
			s.pageError(w, r, &p, err, "")
			return
		}
		d.Error = br.msg
		s.render(w, http.StatusBadRequest, "claims", pageData{Title: "Claims", User: &p, Data: d})
		return
	}
	pg, err := s.listClaims(r.Context(), f)
	if err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	if d.Matched, err = s.matched(r.Context(), f); err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	d.Claims = pg.claims
	d.First, d.Prev, d.Next = pageLinks(q, pg)
	if p.Operator() && (f.Status == "" || f.Status == claim.Failed) {
		if d.NoneFailed, err = s.noneFailed(r.Context(), f, d.Matched); err != nil {
			s.pageError(w, r, &p, err, "")
			return
		}
		if !d.NoneFailed {
			d.BulkRetry = "/console/claims/retry?" + filterQuery(q).Encode()
		}
	}
	d.Follow = bulkFollow(r.URL.Query())
	s.render(w, http.StatusOK, "claims", pageData{Title: "Claims", User: &p, Flash: bulkFlash(r.URL.Query()), Data: d, Unavailable: s.unavailable(r)})
}

// noneFailed reports whether f, with any status or failed, matches no
// failed claim (matched is the list's count of f's matches): then the
// list offers no bulk retry. A count that takes too long offers it.
func (s *Server) noneFailed(ctx context.Context, f claim.Search, matched string) (bool, error) {
	if matched == "0" {
		return true, nil
	}
	if f.Status == claim.Failed {
		return false, nil
	}
	f.Status = claim.Failed
	cctx, cancel := context.WithTimeout(ctx, s.countTime)
	defer cancel()
	n, err := s.store.CountClaimsUpTo(cctx, f, 1)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return false, nil
	}
	return err == nil && n == 0, err
}
