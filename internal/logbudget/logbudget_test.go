package logbudget

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The first lines of each second are written; the rest are counted, and the
// count, by result, is logged when a later second begins.
func TestBudgetSamplesAndCounts(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	ctx := context.Background()
	l := New(3, "lines over the budget")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

	var allowed int
	for i := range 5 {
		if l.Allow(ctx, logger, t0.Add(time.Duration(i)*time.Millisecond), "claimed") {
			allowed++
		}
	}
	require.False(t, l.Allow(ctx, logger, t0.Add(10*time.Millisecond), "duplicate"))
	require.Equal(t, 3, allowed, "the first three lines of the second")
	require.Empty(t, out.String(), "nothing is logged about the second until it is over")

	require.True(t, l.Allow(ctx, logger, t0.Add(1200*time.Millisecond), "claimed"), "a new second, a new budget")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1)
	var summary struct {
		Msg       string         `json:"msg"`
		NotLogged int            `json:"not_logged"`
		PerSecond int            `json:"per_second"`
		Second    time.Time      `json:"second"`
		ByResult  map[string]int `json:"by_result"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &summary))
	require.Equal(t, "lines over the budget", summary.Msg)
	require.Equal(t, 3, summary.NotLogged)
	require.Equal(t, 3, summary.PerSecond)
	require.True(t, summary.Second.Equal(t0))
	require.Equal(t, map[string]int{"claimed": 2, "duplicate": 1}, summary.ByResult)

	// A second with nothing over the budget logs no count.
	out.Reset()
	require.True(t, l.Allow(ctx, logger, t0.Add(2500*time.Millisecond), "claimed"))
	require.Empty(t, out.String())
}
