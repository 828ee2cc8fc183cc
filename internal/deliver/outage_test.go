package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/migrate"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestEndsReleasedWhenPostgresFreezes freezes Postgres (SIGSTOP on a cluster
// of the test's own) under many jobs ending at once: every end, the one in
// the batch that hangs and the ones queued behind it, is released with an
// error within the documented bound of twice the batch timeout, rather than
// each being run again on its own. After the thaw, the same ends succeed.
func TestEndsReleasedWhenPostgresFreezes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := dbtest.NewCluster(t)
	pool, err := pgxpool.New(ctx, cluster.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = migrate.Up(ctx, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(pool, client, func(string) int { return 5 })

	const n = 40
	keys := make([]claim.Key, n)
	for i := range keys {
		id := fmt.Sprintf("evt_%d", i)
		_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "p", ID: id, Type: "t", Payload: []byte("{}")}, []string{"r"}, false)
		require.NoError(t, err)
		keys[i] = claim.Key{Provider: "p", EventID: id, Route: "r"}
	}
	testfactory.SetJobs(ctx, t, pool, testfactory.JobWhere{},
		&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()})
	jobs := make([]*river.Job[claim.DeliveryArgs], n)
	for i, k := range keys {
		found := testfactory.Jobs(ctx, t, pool, testfactory.JobWhere{Delivery: k})
		require.Len(t, found, 1)
		row, err := client.JobGet(ctx, found[0].ID)
		require.NoError(t, err)
		jobs[i] = &river.Job[claim.DeliveryArgs]{JobRow: row, Args: claim.DeliveryArgs(k)}
	}

	// Warm the pool, so that the frozen server holds open connections.
	conns := make([]*pgxpool.Conn, 4)
	for i := range conns {
		conns[i], err = pool.Acquire(ctx)
		require.NoError(t, err)
	}
	for _, c := range conns {
		c.Release()
	}

	const timeout = 2 * time.Second
	c := newCompleter(pool, nil, timeout, noChain, nil)
	thaw, err := cluster.Freeze()
	require.NoError(t, err)
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			thaw()
		}
	})

	wctx := rivertest.WorkContext(ctx, client)
	end := func(i int) (endResult, error) {
		return c.end(wctx, jobs[i], claim.Attempt{Key: keys[i], Result: claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}})
	}
	results := make([]endResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = end(i) })
	}
	released := make(chan struct{})
	go func() { wg.Wait(); close(released) }()
	// The bound is a promise of the code, not a speed: 2 × timeout, plus
	// slack for a loaded machine.
	select {
	case <-released:
	case <-time.After(2*timeout + 3*time.Second):
		t.Fatalf("ends still waiting %s after Postgres froze; the bound is %s", 2*timeout+3*time.Second, 2*timeout)
	}
	for i := range n {
		require.Equal(t, failedToRecord, results[i], i)
		require.Error(t, errs[i])
	}

	thaw()
	thawed = true
	// River would run these jobs again; their ends now go through.
	for i := range n {
		wg.Go(func() { results[i], errs[i] = end(i) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, ended, results[i], i)
	}
}
