package claim_test

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

func TestOldestDueDelivery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	oldest := claim.OldestDueDelivery(client)

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
	store := claim.NewStore(db.Pool, client, nil)
	isPaused, err := store.RoutePaused(ctx, client, "paused")
	require.NoError(t, err)
	require.False(t, isPaused, "a queue no worker has run is not paused")
	require.NoError(t, store.PauseRoute(ctx, client, "paused"))
	isPaused, err = store.RoutePaused(ctx, client, "paused")
	require.NoError(t, err)
	require.True(t, isPaused)
	age, err = oldest(ctx)
	require.NoError(t, err)
	require.Less(t, age, 10*time.Minute, "not counted once its route is paused")
	require.GreaterOrEqual(t, age, 90*time.Second)
}
