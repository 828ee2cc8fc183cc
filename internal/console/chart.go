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
	chartTop       = 6  // room above the plot for the scale's top label
	chartLeft      = 34 // room left of the plot for the scale's labels
)

// routeChart is one route's chart, ready for the template.
type routeChart struct {
	Route         string
	Width, Height int
	Bars          []chartBar
	Max           int
	// Scale is the count the plot's full height stands for: Max rounded up
	// to 1, 2 or 5 times a power of ten, so that the axis reads in round
	// numbers.
	Scale  int
	Totals [3]int // accepted, delivered, failed
	// Labels mark the time axis every six intervals; Ticks the count axis
	// at 0, half the scale (when it is a whole number) and the scale.
	Labels []chartLabel
	Ticks  []chartTick
	// Left and Top place the plot; Bottom is the time axis's y, LabelY its
	// labels'.
	Left, Top, Bottom, LabelY int
}

// chartTick is one mark of the count axis: its y and the count it reads.
type chartTick struct {
	Y, TextX, TextY int
	Text            string
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
	c := routeChart{Route: route, Width: chartLeft + chartIntervals*chartSlot, Height: chartTop + chartHeight + chartPad,
		Left: chartLeft, Top: chartTop, Bottom: chartTop + chartHeight, LabelY: chartTop + chartHeight + chartPad - 1}
	for _, a := range acts {
		if a.Interval < 0 || a.Interval >= chartIntervals {
			continue
		}
		c.Max = max(c.Max, a.Accepted)
		c.Totals[0] += a.Accepted
		c.Totals[1] += a.Delivered
		c.Totals[2] += a.Failed
	}
	c.Scale = niceCeil(c.Max)
	for _, v := range []int{0, c.Scale / 2, c.Scale} {
		if v == c.Scale/2 && (c.Scale%2 != 0 || v == 0) {
			continue
		}
		y := chartTop + chartHeight - v*chartHeight/c.Scale
		c.Ticks = append(c.Ticks, chartTick{Y: y, TextX: chartLeft - 4, TextY: y + 3, Text: strconv.Itoa(v)})
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
			h := (kind.n*chartHeight + c.Scale - 1) / c.Scale // a bar of 1 is never 0 px
			c.Bars = append(c.Bars, chartBar{Kind: kind.name, X: chartLeft + a.Interval*chartSlot + 2 + i*chartBarWidth,
				Y: chartTop + chartHeight - h, W: chartBarWidth - 1, H: h, Title: title})
		}
	}
	for i := 0; i < chartIntervals; i += 6 {
		c.Labels = append(c.Labels, chartLabel{X: chartLeft + i*chartSlot, Text: since.Add(time.Duration(i) * step).UTC().Format("15:04")})
	}
	return c
}

// niceCeil rounds n up to the next 1, 2 or 5 times a power of ten (at
// least 1), the top of a count axis that reads in round numbers.
func niceCeil(n int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
