package console

import (
	"context"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// The overview's charts: per route, accepted, delivered and failed
// deliveries per interval over the window, drawn on the server as inline
// SVG (no script, nothing loaded from elsewhere: the CSP stays strict).
const (
	chartWindow    = 24 * time.Hour
	chartIntervals = 24
	chartBarWidth  = 6  // three bars an interval, then a gap
	chartSlot      = 22 // an interval's width
	chartHeight    = 90
	chartPad       = 14 // room for the axis labels below
)

// routeChart is one route's chart, ready for the template.
type routeChart struct {
	Route         string
	Width, Height int
	Bars          []chartBar
	Max           int
	Totals        [3]int // accepted, delivered, failed
	// Labels mark the axis every six intervals.
	Labels []chartLabel
}

// chartBar is one bar: Kind is accepted, delivered or failed.
type chartBar struct {
	Kind       string
	X, Y, W, H int
	Title      string
}

type chartLabel struct {
	X    int
	Text string
}

// routeCharts reads the window's activity and draws a chart per route in
// order, each scaled to its own busiest interval.
func (s *Server) routeCharts(ctx context.Context, routes []string, now time.Time) ([]routeChart, error) {
	step := chartWindow / chartIntervals
	since := now.Truncate(step).Add(step - chartWindow) // the last interval holds now
	acts, err := s.store.RouteActivity(ctx, since, step, chartIntervals)
	if err != nil {
		return nil, err
	}
	byRoute := map[string][]claim.Activity{}
	for _, a := range acts {
		byRoute[a.Route] = append(byRoute[a.Route], a)
	}
	charts := make([]routeChart, 0, len(routes))
	for _, r := range routes {
		charts = append(charts, drawChart(r, byRoute[r], since, step))
	}
	return charts, nil
}

// drawChart lays out acts (one route's) as bars.
func drawChart(route string, acts []claim.Activity, since time.Time, step time.Duration) routeChart {
	c := routeChart{Route: route, Width: chartIntervals * chartSlot, Height: chartHeight + chartPad}
	for _, a := range acts {
		c.Max = max(c.Max, a.Accepted)
		c.Totals[0] += a.Accepted
		c.Totals[1] += a.Delivered
		c.Totals[2] += a.Failed
	}
	for _, a := range acts {
		if a.Interval < 0 || a.Interval >= chartIntervals {
			continue
		}
		from := since.Add(time.Duration(a.Interval) * step).UTC()
		title := from.Format("15:04") + "–" + from.Add(step).Format("15:04") + " UTC: " +
			strconv.Itoa(a.Accepted) + " accepted, " + strconv.Itoa(a.Delivered) + " delivered, " + strconv.Itoa(a.Failed) + " failed"
		for i, kind := range []struct {
			name string
			n    int
		}{{"accepted", a.Accepted}, {"delivered", a.Delivered}, {"failed", a.Failed}} {
			h := 0
			if c.Max > 0 {
				h = (kind.n*chartHeight + c.Max - 1) / c.Max // a bar of 1 is never 0 px
			}
			c.Bars = append(c.Bars, chartBar{Kind: kind.name, X: a.Interval*chartSlot + 2 + i*chartBarWidth,
				Y: chartHeight - h, W: chartBarWidth - 1, H: h, Title: title})
		}
	}
	for i := 0; i < chartIntervals; i += 6 {
		c.Labels = append(c.Labels, chartLabel{X: i * chartSlot, Text: since.Add(time.Duration(i) * step).UTC().Format("15:04")})
	}
	return c
}
