package deliver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// countedDelivered is the claim store, counting its BreakerDelivered calls
// and holding the first until release is closed.
type countedDelivered struct {
	breakerStore
	calls   atomic.Int32
	release chan struct{}
}

func (c *countedDelivered) BreakerDelivered(ctx context.Context, route string, answered time.Time, remember time.Duration) (bool, error) {
	if c.calls.Add(1) == 1 {
		<-c.release
	}
	return c.breakerStore.BreakerDelivered(ctx, route, answered, remember)
}

// TestDeliveredAnswersShareAWrite: the delivered answers of a route that
// arrive while one is being written go to Postgres as one write, of the
// latest answer, which drops a failure answered before it as each of them
// would have.
func TestDeliveredAnswersShareAWrite(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfg, routes := shipWithBreaker(t, 100)
	b := newBreakers(db.Pool, cfg, routes, slog.New(slog.DiscardHandler), 5*time.Second)
	store := &countedDelivered{breakerStore: b.store, release: make(chan struct{})}
	b.store = store

	start := time.Now().Add(-10 * time.Second) // every answer in the past
	_, err := store.BreakerAnswer(t.Context(), "ship", claim.BreakerFailed, start, "503",
		claim.BreakerSettings{Failures: 3, CoolDown: time.Hour, MaxCoolDown: time.Hour})
	require.NoError(t, err)

	// The first answer's write is held; fifty more arrive meanwhile, the
	// last answered latest.
	var wg sync.WaitGroup
	wg.Go(func() { b.delivered(t.Context(), "ship", start.Add(10*time.Millisecond)) })
	require.Eventually(t, func() bool { return store.calls.Load() == 1 }, 10*time.Second, time.Millisecond)
	latest := start.Add(10 * time.Millisecond)
	for i := range 50 {
		at := start.Add(time.Duration(i+2) * 10 * time.Millisecond)
		latest = at
		wg.Go(func() { b.delivered(t.Context(), "ship", at) })
	}
	require.Eventually(t, func() bool { return b.answers["ship"].Waiting() == 50 }, 10*time.Second, time.Millisecond)
	close(store.release)
	wg.Wait()

	require.EqualValues(t, 2, store.calls.Load(), "the held write, then one for the fifty that waited")
	bs, err := claim.NewStore(db.Pool, nil, nil).Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Zero(t, bs["ship"].Failures, "the failure answered before them no longer counts")
	require.NotNil(t, bs["ship"].LastDeliveredAt)
	require.WithinDuration(t, latest, *bs["ship"].LastDeliveredAt, 100*time.Millisecond,
		"the last delivery is the latest answer (taken as its age off the database's clock)")
}
