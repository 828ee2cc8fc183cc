package ingest_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// groupBundle is a group over a database of the test's own, recording the
// size of each batch it runs and counting the transactions it begins.
type groupBundle struct {
	pool  *pgxpool.Pool
	store *claim.Store
	group *ingest.Group
	txs   *countingDB
	mu    sync.Mutex
	sizes []int
}

// countingDB counts the transactions begun on its pool.
type countingDB struct {
	*pgxpool.Pool
	begun atomic.Int32
}

func (c *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.begun.Add(1)
	return c.Pool.Begin(ctx)
}

func setupGroup(t *testing.T) *groupBundle {
	t.Helper()
	db := dbtest.NewDB(t)
	jobs, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	maxAttempts := func(string) int { return 3 }
	g := &groupBundle{pool: db.Pool, store: claim.NewStore(db.Pool, jobs, maxAttempts), txs: &countingDB{Pool: db.Pool}}
	// One transaction at a time, so that holding one makes the others queue.
	g.group = ingest.NewGroup(claim.NewStore(g.txs, jobs, maxAttempts), ingest.GroupOptions{Timeout: 5 * time.Second, Concurrency: 1, Observe: func(n int) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.sizes = append(g.sizes, n)
	}})
	return g
}

func (g *groupBundle) batchSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}

func groupEvent(id string) claim.Event {
	return claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", ContentType: "application/json",
		Payload: []byte(`{"id": "` + id + `"}`)}
}

// request is one Claim call made through the group.
type request struct {
	ev     claim.Event
	routes []string
	reopen bool
	res    claim.Result
	err    error
}

// hold makes the group's next batch wait: a transaction of the test's own
// inserts the claim of id without committing, and a claim of id through the
// group then waits on its key. It returns the held request and a release
// that rolls the test's transaction back, letting the held batch finish.
func (g *groupBundle) hold(t *testing.T, id string) (held *request, done *sync.WaitGroup, release func()) {
	t.Helper()
	ctx := t.Context()
	tx, err := g.pool.Begin(ctx)
	require.NoError(t, err)
	testfactory.Claim(ctx, t, tx, &testfactory.ClaimOpts{EventID: id})
	// A test failing before it releases must not leave the pool waiting for it.
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	held = &request{ev: groupEvent(id), routes: []string{"ship"}}
	done = &sync.WaitGroup{}
	done.Go(func() { held.res, held.err = g.group.Claim(context.Background(), held.ev, held.routes, false) })
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, g.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond, "the held batch waits on the test's uncommitted claim")
	return held, done, func() { _ = tx.Rollback(context.Background()) }
}

// queue makes the requests through the group at once, and waits until all
// of them wait for the batch in flight.
func (g *groupBundle) queue(t *testing.T, done *sync.WaitGroup, reqs []*request) {
	t.Helper()
	for _, r := range reqs {
		done.Go(func() { r.res, r.err = g.group.Claim(context.Background(), r.ev, r.routes, r.reopen) })
	}
	require.Eventually(t, func() bool { return g.group.Waiting() == len(reqs) }, 10*time.Second, time.Millisecond)
}

func (g *groupBundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, g.pool.QueryRow(t.Context(), sql).Scan(&n))
	return n
}

// TestGroupSharesOneBatch: requests that arrive while a claim transaction
// runs share the next one, and each gets its own event's result.
func TestGroupSharesOneBatch(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, "evt_hold")
	reqs := []*request{
		{ev: groupEvent("evt_a"), routes: []string{"ship", "mail"}},
		{ev: groupEvent("evt_a"), routes: []string{"ship", "mail"}},
		{ev: groupEvent("evt_b"), routes: []string{"ship"}},
		{ev: groupEvent("evt_none")},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()

	require.NoError(t, held.err)
	require.Equal(t, claim.Claimed, held.res.Decision, "the held claim wins once the test's insert rolls back")
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the queued requests shared one batch")
	outcomes := map[string][]claim.Decision{}
	for _, r := range reqs {
		require.NoError(t, r.err)
		outcomes[r.ev.ID] = append(outcomes[r.ev.ID], r.res.Decision)
	}
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate}, outcomes["evt_a"])
	require.Equal(t, []claim.Decision{claim.Claimed}, outcomes["evt_b"])
	require.Equal(t, []claim.Decision{claim.ClaimedIgnored}, outcomes["evt_none"])
	// One job per delivery of each claim won.
	rivertest.RequireManyInserted(t.Context(), t, riverpgxv5.New(g.pool), testfactory.DeliveryJobs(1+2+1, nil))
}

// TestGroupOneBadRequest: events holding text the tables cannot store (a
// NUL in the id, a byte that is not UTF-8 in the Content-Type) fail only
// their own requests, with ErrUnstorable, and cost the others of their
// batch no round trip: the batch of seven is one transaction.
func TestGroupOneBadRequest(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, "evt_hold")
	nul := groupEvent("evt_bad\x00") // text cannot hold NUL: Postgres would refuse the statement
	poison := groupEvent("evt_poison")
	poison.ContentType = "\xff" // nor bytes that are not UTF-8 (SQLSTATE 22021)
	reqs := []*request{
		{ev: groupEvent("evt_1"), routes: []string{"ship"}},
		{ev: groupEvent("evt_2"), routes: []string{"ship"}},
		{ev: nul, routes: []string{"ship"}},
		{ev: groupEvent("evt_3"), routes: []string{"ship"}},
		{ev: poison, routes: []string{"ship"}},
		{ev: groupEvent("evt_4"), routes: []string{"ship"}},
		{ev: groupEvent("evt_5"), routes: []string{"ship"}},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)

	for _, r := range reqs {
		if r.ev.ID == nul.ID || r.ev.ID == poison.ID {
			require.ErrorIs(t, r.err, claim.ErrUnstorable, r.ev.ID)
			continue
		}
		require.NoError(t, r.err, r.ev.ID)
		require.Equal(t, claim.Claimed, r.res.Decision, r.ev.ID)
	}
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the seven shared one batch")
	require.EqualValues(t, 2, g.txs.begun.Load(), "one transaction for the held claim, one for the batch: none split off")
	require.Equal(t, 6, g.count(t, `SELECT count(*) FROM webhook_event_claims`))
	rivertest.RequireManyInserted(t.Context(), t, riverpgxv5.New(g.pool), testfactory.DeliveryJobs(6, nil))
}

// TestGroupReopensAlone: a redelivery of a failed event, batched with
// others, is reopened alone after its batch (claim.Store.Resolve).
func TestGroupReopensAlone(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	ctx := t.Context()
	res, err := testfactory.ClaimEvent(ctx, g.store, groupEvent("evt_failed"), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)
	require.NoError(t, g.store.RecordAttempt(ctx, claim.Key{Provider: "stripe", EventID: "evt_failed", Route: "ship"},
		claim.AttemptResult{Status: claim.DeliveryFailed, Attempted: true, Error: "downstream answered 422"}))

	held, done, release := g.hold(t, "evt_hold")
	reqs := []*request{
		{ev: groupEvent("evt_failed"), routes: []string{"ship"}, reopen: true},
		{ev: groupEvent("evt_new"), routes: []string{"ship"}, reopen: true},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes())
	require.NoError(t, reqs[0].err)
	require.Equal(t, claim.Reopened, reqs[0].res.Decision)
	require.Equal(t, 1, reqs[0].res.Deliveries)
	require.NoError(t, reqs[1].err)
	require.Equal(t, claim.Claimed, reqs[1].res.Decision)
	c, _, err := g.store.Get(ctx, "stripe", "evt_failed")
	require.NoError(t, err)
	require.Equal(t, claim.Processing, c.Status)
}
