package claim_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestRateTakeConcurrent has several takers (as many workers would) take
// tokens of one route at once for a while, and checks the grants against
// the rate at the database's times: no window of per holds more than limit
// + burst, and the route's tokens are all handed out (none lost to the
// contention), so that a backlog runs at its limit.
func TestRateTakeConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	store := claim.NewStore(db.Pool, nil, nil)
	set := claim.RateSettings{Limit: 10, Per: 250 * time.Millisecond, Burst: 3}
	const takers, run = 6, 1500 * time.Millisecond

	type grant struct {
		at time.Time
		n  int
	}
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	stop := time.Now().Add(run)
	for i := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				g, err := store.RateTake(ctx, "paced", set, 1+i%3)
				if err != nil {
					t.Error(err)
					return
				}
				if g.Granted > 0 {
					mu.Lock()
					grants = append(grants, grant{g.Now, g.Granted})
					mu.Unlock()
					continue
				}
				if !g.NextAt.After(g.Now) {
					t.Errorf("a refused take says when the next token is free: next %s, now %s", g.NextAt, g.Now)
					return
				}
				time.Sleep(min(time.Until(stop), g.NextAt.Sub(g.Now)))
			}
		}()
	}
	wg.Wait()
	require.NotEmpty(t, grants)
	sort.Slice(grants, func(i, j int) bool { return grants[i].at.Before(grants[j].at) })

	total := 0
	for i, g := range grants {
		total += g.n
		inWindow := 0
		for _, h := range grants[i:] {
			if !h.at.Before(g.at.Add(set.Per)) {
				break
			}
			inWindow += h.n
		}
		require.LessOrEqual(t, inWindow, set.Limit+set.Burst, "window from %s", g.at)
	}
	span := grants[len(grants)-1].at.Sub(grants[0].at)
	ceiling := set.Burst + 1 + int(span.Seconds()*float64(set.Limit)/set.Per.Seconds())
	require.LessOrEqual(t, total, ceiling)
	// Every taker waits exactly until the next token is due, so the
	// tokens refilled meanwhile are all taken: at least 0.9 of them.
	require.GreaterOrEqual(t, float64(total), 0.9*float64(ceiling), "granted %d of %d over %s", total, ceiling, span)
}

// TestRateHold holds a route, rated or not: a take is refused until the
// hold ends, and a shorter hold does not shorten a longer one.
func TestRateHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := claim.NewStore(dbtest.Tx(t), nil, nil)
	set := claim.RateSettings{Limit: 5, Per: time.Second, Burst: 1}

	g, err := store.RateTake(ctx, "paced", set, 5)
	require.NoError(t, err)
	require.Equal(t, 2, g.Granted, "a new route starts with a full bucket: burst + 1")
	require.Nil(t, g.HeldUntil)
	require.Equal(t, g.Now.Add(200*time.Millisecond), g.NextAt, "the next token refills in per/limit")

	until, err := store.RateHold(ctx, "paced", time.Hour)
	require.NoError(t, err)
	shorter, err := store.RateHold(ctx, "paced", time.Minute)
	require.NoError(t, err)
	require.Equal(t, until, shorter, "a shorter hold keeps the longer one")
	g, err = store.RateTake(ctx, "paced", set, 1)
	require.NoError(t, err)
	require.Zero(t, g.Granted)
	require.NotNil(t, g.HeldUntil)
	require.True(t, g.NextAt.Equal(until))

	held, err := store.RateHold(ctx, "unpaced", 2*time.Second)
	require.NoError(t, err)
	rates, err := store.Rates(ctx, []string{"paced", "unpaced", "other"})
	require.NoError(t, err)
	require.Len(t, rates, 2, "a route neither paced nor held has no row")
	require.True(t, rates["unpaced"].HeldUntil.Equal(held), "a route without a rate is held too")
	require.True(t, rates["paced"].HeldUntil.Equal(until))
}
