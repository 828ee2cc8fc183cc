package deliver_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/deliver"
)

func TestOldestQueuedDelivery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	oldest := deliver.OldestQueuedDelivery(client)

	age, err := oldest(ctx)
	require.NoError(t, err)
	require.Zero(t, age, "no job, no age")

	// A job scheduled for later (a retry waiting out its backoff) is not
	// queued yet; one scheduled in the past is, though no leader has made
	// it available.
	_, err = client.Insert(ctx, claim.DeliveryArgs{Provider: "p", EventID: "later", Route: "r"},
		&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	age, err = oldest(ctx)
	require.NoError(t, err)
	require.Zero(t, age)

	_, err = client.Insert(ctx, claim.DeliveryArgs{Provider: "p", EventID: "due", Route: "r"},
		&river.InsertOpts{ScheduledAt: time.Now().Add(-90 * time.Second)})
	require.NoError(t, err)
	_, err = client.Insert(ctx, claim.DeliveryArgs{Provider: "p", EventID: "new", Route: "r"}, nil)
	require.NoError(t, err)
	age, err = oldest(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, age, 90*time.Second)
	require.Less(t, age, 10*time.Minute)

	// A paused route's jobs wait on purpose: older, but not counted.
	paused := claim.Queue("paused")
	_, err = client.Insert(ctx, claim.DeliveryArgs{Provider: "p", EventID: "held", Route: "paused"},
		&river.InsertOpts{Queue: paused, ScheduledAt: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	age, err = oldest(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, age, time.Hour, "counted while its queue runs")
	require.NoError(t, claim.NewStore(db.Pool, client, nil).PauseRoute(ctx, client, "paused"))
	age, err = oldest(ctx)
	require.NoError(t, err)
	require.Less(t, age, 10*time.Minute, "not counted once its route is paused")

	v := testutil.ToFloat64(deliver.NewQueueCollector(oldest, 2*time.Second, slog.New(slog.DiscardHandler)))
	require.GreaterOrEqual(t, v, 90.0)
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
