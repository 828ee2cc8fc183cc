package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookgate/hookgate/internal/logbudget"
)

// deliveredLinesPerSecond is how many "delivered" lines a worker writes in
// one second. Past it, deliveries are counted rather than logged, and the
// count is logged once a later second begins (see logbudget). In a drain
// the worker's log was a tenth of its CPU: the line's formatting, a write
// to stderr for each delivery, and the job's attributes formatted up front
// for lines mostly never written. Warnings and errors, retries and every
// other line are always written; the attempt history and the metrics keep
// every delivery.
const deliveredLinesPerSecond = 100

// deliveredLinesSummary is the message of the line that counts the
// "delivered" lines not written.
const deliveredLinesSummary = "delivery lines over the budget were counted, not written"

// jobLog is a job's logger: its attributes are kept as they are and
// formatted only when a line is written, since most jobs write one line,
// and most of those are sampled away.
type jobLog struct {
	base  *slog.Logger
	lines *logbudget.Budget // the worker's "delivered" lines
	now   func() time.Time
	attrs []slog.Attr
}

// with adds attributes to every later line.
func (l *jobLog) with(attrs ...slog.Attr) { l.attrs = append(l.attrs, attrs...) }

func (l *jobLog) log(level slog.Level, msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !l.base.Enabled(ctx, level) {
		return
	}
	all := make([]slog.Attr, 0, len(l.attrs)+len(attrs))
	l.base.LogAttrs(ctx, level, msg, append(append(all, l.attrs...), attrs...)...)
}

func (l *jobLog) Debug(msg string, attrs ...slog.Attr) { l.log(slog.LevelDebug, msg, attrs...) }
func (l *jobLog) Info(msg string, attrs ...slog.Attr)  { l.log(slog.LevelInfo, msg, attrs...) }
func (l *jobLog) Warn(msg string, attrs ...slog.Attr)  { l.log(slog.LevelWarn, msg, attrs...) }
func (l *jobLog) Error(msg string, attrs ...slog.Attr) { l.log(slog.LevelError, msg, attrs...) }

// Delivered writes the "delivered" line, within the worker's budget of
// them (deliveredLinesPerSecond).
func (l *jobLog) Delivered() {
	ctx := context.Background()
	if l.base.Enabled(ctx, slog.LevelInfo) && l.lines.Allow(ctx, l.base, l.now(), "delivered") {
		l.log(slog.LevelInfo, "delivered")
	}
}
