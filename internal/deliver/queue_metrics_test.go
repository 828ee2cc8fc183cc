package deliver_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/deliver"
)

func TestQueueCollectorReportsAge(t *testing.T) {
	t.Parallel()
	v := testutil.ToFloat64(deliver.NewQueueCollector(func(context.Context) (time.Duration, error) {
		return 90 * time.Second, nil
	}, time.Second, slog.New(slog.DiscardHandler)))
	require.Equal(t, 90.0, v)
}

func TestQueueCollectorReportsFailure(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(deliver.NewQueueCollector(func(context.Context) (time.Duration, error) {
		return 0, errors.New("database unreachable")
	}, time.Second, slog.New(slog.DiscardHandler)))
	_, err := reg.Gather()
	require.ErrorContains(t, err, "database unreachable")
}
