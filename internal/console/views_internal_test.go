package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		10 * time.Second:    "just now",
		3 * time.Minute:     "3 min ago",
		59 * time.Minute:    "59 min ago",
		5 * time.Hour:       "5 h ago",
		47 * time.Hour:      "47 h ago",
		72 * time.Hour:      "3 days ago",
		-10 * time.Minute:   "in 10 min",
		-3 * 24 * time.Hour: "in 3 days",
	} {
		require.Equal(t, want, ago(now.Add(-d), now), d)
	}
	require.Empty(t, agoPtr(nil, now))
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		require.Equal(t, want, thousands(n))
	}
}

func TestAuditLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ action, target, want string }{
		{"retry", "stripe/evt_1", "/console/claims/stripe/evt_1"},
		{"retry", "stripe/a/b?c", "/console/claims/stripe/a%2Fb%3Fc"},
		{"pause", "ship", "/console/routes#route-ship"},
		{"resume", "ship", "/console/routes#route-ship"},
		{"pause", "<script>", ""},
		{"bulk_retry", "claims", "/console/claims?status=failed"},
		{"sign_in", "", ""},
		{"retry", "nothing", ""},
	} {
		require.Equal(t, c.want, auditLink(c.action, c.target), "%s %s", c.action, c.target)
	}
}

func TestDestinationMasksPasswords(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://user:xxxxx@ship.example/v1", destination("https://user:hunter2@ship.example/v1"))
	require.Equal(t, "http://127.0.0.1:1/ship", destination("http://127.0.0.1:1/ship"))
}

func TestParseWhen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Time{
		"30m":                  now.Add(-30 * time.Minute),
		"1h":                   now.Add(-time.Hour),
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"9999d":                now.Add(-maxAgo),
		"2026-12-01T00:00:00Z": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseWhen(v, now)
		require.NoError(t, err, v)
		require.True(t, want.Equal(got), "%s: %s", v, got)
	}
	for _, v := range []string{"0h", "1w", "-1h", "1.5h", "h", "10000d", "yesterday"} {
		_, err := parseWhen(v, now)
		require.Error(t, err, v)
	}
}

// A chart scales each bar to the route's busiest interval, never drawing
// a count of one as nothing, and places each interval in its slot.
func TestDrawChart(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	c := drawChart("ship", []claim.Activity{
		{Route: "ship", Interval: 0, Accepted: 100, Delivered: 99, Failed: 1},
		{Route: "ship", Interval: 23, Accepted: 50, Delivered: 50},
		{Route: "ship", Interval: 24, Accepted: 7}, // outside the window: left out
	}, since, time.Hour)
	require.Equal(t, 100, c.Max)
	require.Equal(t, 100, c.Scale)
	require.Equal(t, [3]int{150, 149, 1}, c.Totals, "the interval outside the window is not counted")
	require.Len(t, c.Bars, 6)
	require.Equal(t, chartBar{Kind: "accepted", X: chartLeft + 2, Y: chartTop, W: 5, H: 90, Title: "00:00–01:00 UTC: 100 accepted, 99 delivered, 1 failed"}, c.Bars[0])
	require.Equal(t, 1, c.Bars[2].H, "one failure is a bar")
	require.Equal(t, chartLeft+23*chartSlot+2, c.Bars[3].X)
	require.Equal(t, 45, c.Bars[3].H)
	require.Len(t, c.Labels, 4)
	require.Equal(t, "18:00", c.Labels[3].Text)
	require.Equal(t, []chartTick{
		{Y: chartTop + 90, TextX: chartLeft - 4, TextY: chartTop + 93, Text: "0"},
		{Y: chartTop + 45, TextX: chartLeft - 4, TextY: chartTop + 48, Text: "50"},
		{Y: chartTop, TextX: chartLeft - 4, TextY: chartTop + 3, Text: "100"},
	}, c.Ticks, "the count axis reads 0, half and the scale")
}

// The count axis's top is the busiest interval rounded up to 1, 2 or 5
// times a power of ten, and bars are drawn against it.
func TestChartScale(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 99: 100, 101: 200, 430: 500, 5001: 10000} {
		require.Equal(t, want, niceCeil(n), n)
	}
	c := drawChart("ship", []claim.Activity{{Route: "ship", Interval: 0, Accepted: 3, Delivered: 3}}, time.Now(), time.Hour)
	require.Equal(t, 5, c.Scale)
	require.Equal(t, 54, c.Bars[0].H, "3 of 5 is 54 of 90 px")
	require.Equal(t, []string{"0", "5"}, []string{c.Ticks[0].Text, c.Ticks[1].Text}, "no half tick for an odd scale")
}
