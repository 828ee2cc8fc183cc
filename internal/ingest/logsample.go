package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// requestLinesPerSecond is how many INFO lines about accepted requests
// (a 2xx answer) ingest writes in one second. Past it, such requests are
// counted rather than logged, and the count, by result, is logged once a
// later second begins. Warnings and errors (4xx, 5xx) are always written.
// At full rate the line was a tenth of ingest's CPU (its formatting, and a
// write to stderr each); the counters in /metrics count every request.
const requestLinesPerSecond = 100

// lineBudget samples the INFO lines of accepted requests: the first
// perSecond of each second are written, the rest counted.
type lineBudget struct {
	perSecond int

	mu      sync.Mutex
	second  time.Time // the current second's start
	written int
	// unlogged counts, by result (a fixed set), the lines of the current
	// second not written.
	unlogged map[string]int
}

// allow reports whether the line of a request accepted at now with result
// may be written. The first call in a new second first logs how many lines
// the earlier one left unwritten.
func (l *lineBudget) allow(ctx context.Context, logger *slog.Logger, now time.Time, result string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.second) >= time.Second || now.Before(l.second) {
		l.flush(ctx, logger)
		l.second, l.written = now.Truncate(time.Second), 0
	}
	if l.written < l.perSecond {
		l.written++
		return true
	}
	if l.unlogged == nil {
		l.unlogged = map[string]int{}
	}
	l.unlogged[result]++
	return false
}

// flush logs the counts of the lines not written, if any.
func (l *lineBudget) flush(ctx context.Context, logger *slog.Logger) {
	if len(l.unlogged) == 0 {
		return
	}
	total := 0
	attrs := make([]slog.Attr, 0, len(l.unlogged)+2)
	for result, n := range l.unlogged {
		total += n
		attrs = append(attrs, slog.Int(result, n))
	}
	attrs = append([]slog.Attr{slog.Int("not_logged", total), slog.Int("per_second", l.perSecond),
		slog.Time("second", l.second)}, slog.Any("by_result", slog.GroupValue(attrs...)))
	logger.LogAttrs(ctx, slog.LevelInfo, "webhook lines over the budget were counted, not written", attrs...)
	clear(l.unlogged)
}
