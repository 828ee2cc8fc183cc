package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// A binary flushes on its way out, after a signal ended its context: the
// flush gets a bounded context of its own, and a failure is logged.
func TestFlushOutlivesItsContext(t *testing.T) {
	t.Parallel()
	var flushCtxErr error
	var hasDeadline bool
	tr := &Tracing{shutdown: func(ctx context.Context) error {
		flushCtxErr = ctx.Err()
		_, hasDeadline = ctx.Deadline()
		return errors.New("collector unreachable")
	}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var logs bytes.Buffer
	tr.Flush(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, flushCtxErr, "the flush is not cut short by the ended context")
	require.True(t, hasDeadline, "the flush is bounded")
	require.Contains(t, logs.String(), "traces not flushed")
	require.Contains(t, logs.String(), "collector unreachable")

	logs.Reset()
	var off *Tracing
	off.Flush(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
	require.Empty(t, logs.String(), "tracing off: nothing to flush")
}
