// Package logbudget samples a binary's most frequent INFO line: the first
// lines of each second are written, the rest counted, and the count, by
// result, logged as one line once a later second begins. Ingest's line per
// accepted request and the worker's per delivered attempt use it; warnings
// and errors never go through it, and the metrics count every event.
package logbudget

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Budget samples one kind of INFO line. Results name what the lines
// counted were about; they must come from a fixed set, never from input.
type Budget struct {
	perSecond int
	summary   string // the message of the count's line

	mu      sync.Mutex
	second  time.Time // the current second's start
	written int
	// unlogged counts, by result, the lines of the current second not
	// written.
	unlogged map[string]int
}

// New returns a budget of perSecond lines a second, whose count of lines
// not written is logged with the message summary.
func New(perSecond int, summary string) *Budget {
	return &Budget{perSecond: perSecond, summary: summary}
}

// Allow reports whether a line about result, at now, may be written. The
// first call in a new second first logs how many lines the earlier one
// left unwritten.
func (l *Budget) Allow(ctx context.Context, logger *slog.Logger, now time.Time, result string) bool {
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
func (l *Budget) flush(ctx context.Context, logger *slog.Logger) {
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
	logger.LogAttrs(ctx, slog.LevelInfo, l.summary, attrs...)
	clear(l.unlogged)
}
