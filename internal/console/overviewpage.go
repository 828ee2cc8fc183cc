package console

import (
	"net/http"
	"slices"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// statusCount is one cell of the overview.
type statusCount struct {
	Status string
	Count  int
}

type overview struct {
	Statuses []statusCount
	Routes   []routeView
	// Charts are the routes' activity over the window, in Routes' order.
	Charts []routeChart
}

func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request, p principal) {
	var o overview
	now := time.Now()
	counts, err := s.store.StatusCounts(r.Context(), now.Add(-24*time.Hour))
	if err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	for _, st := range []claim.Status{claim.Failed, claim.Processing, claim.Completed, claim.Ignored} {
		o.Statuses = append(o.Statuses, statusCount{string(st), counts[st]})
	}
	if o.Routes, err = s.routeViews(r.Context()); err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	// Open circuits first, then paused routes, then failing ones.
	slices.SortStableFunc(o.Routes, func(a, b routeView) int {
		if ao, bo := a.BreakerOpen(), b.BreakerOpen(); ao != bo {
			return map[bool]int{true: -1, false: 1}[ao]
		}
		if a.Paused != b.Paused {
			return map[bool]int{true: -1, false: 1}[a.Paused]
		}
		return b.Failed - a.Failed
	})
	names := make([]string, len(o.Routes))
	for i, rv := range o.Routes {
		names[i] = rv.Route
	}
	if o.Charts, err = s.routeCharts(r.Context(), names, now); err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	s.render(w, http.StatusOK, "overview", pageData{Title: "Overview", User: &p, Data: o, Unavailable: s.unavailable(r)})
}
