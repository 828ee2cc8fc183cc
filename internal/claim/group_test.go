package claim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// groupBundle is a group over a database of the test's own, recording the
// size of each batch it runs.
type groupBundle struct {
	*bundle
	group *claim.Group
	mu    sync.Mutex
	sizes []int
}

func setupGroup(t *testing.T) *groupBundle {
	t.Helper()
	g := &groupBundle{bundle: setupDB(t)}
	// One transaction at a time, so that holding one makes the others queue.
	g.group = claim.NewGroup(g.store, claim.GroupOptions{Timeout: 5 * time.Second, Concurrency: 1, Observe: func(n int) {
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
func (g *groupBundle) hold(t *testing.T, pool *pgxpool.Pool, id string) (held *request, done *sync.WaitGroup, release func()) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload)
VALUES ('stripe', $1, 'invoice.paid', 'processing', '{}')`, id)
	require.NoError(t, err)
	held = &request{ev: event(id), routes: []string{"ship"}}
	done = &sync.WaitGroup{}
	done.Go(func() { held.res, held.err = g.group.Claim(context.Background(), held.ev, held.routes, false) })
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
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

func count(t *testing.T, pool *pgxpool.Pool, sql string, arguments ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, arguments...).Scan(&n))
	return n
}

// TestGroupDuplicatesInOneBatch: copies of one key in the same batch
// resolve to one claim (with its deliveries and jobs) and duplicates; all
// the batch's events commit together.
func TestGroupDuplicatesInOneBatch(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	g.claimed(t, "evt_old", "ship")

	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{
		{ev: event("evt_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_b"), routes: []string{"ledger"}},
		{ev: event("evt_b"), routes: []string{"ledger"}},
		{ev: event("evt_none")},
		{ev: event("evt_old"), routes: []string{"ship"}},
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
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate, claim.Duplicate}, outcomes["evt_a"])
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate}, outcomes["evt_b"])
	require.Equal(t, []claim.Decision{claim.ClaimedIgnored}, outcomes["evt_none"])
	require.Equal(t, []claim.Decision{claim.Duplicate}, outcomes["evt_old"])
	for _, r := range reqs {
		switch {
		case r.res.Decision == claim.Claimed:
			require.Equal(t, claim.Processing, r.res.Status)
			require.Equal(t, len(r.routes), r.res.Deliveries)
		case r.ev.ID == "evt_none":
			require.Equal(t, claim.Ignored, r.res.Status)
		default:
			require.Equal(t, claim.Processing, r.res.Status, "a duplicate reports the claim's status")
			require.Zero(t, r.res.Deliveries)
		}
	}

	for id, routes := range map[string][]string{"evt_a": {"mail", "ship"}, "evt_b": {"ledger"}, "evt_none": nil, "evt_hold": {"ship"}} {
		c, ds := g.get(t, id)
		require.Len(t, ds, len(routes), id)
		want := claim.Processing
		if len(routes) == 0 {
			want = claim.Ignored
		}
		require.Equal(t, want, c.Status, id)
		for _, r := range routes {
			require.Contains(t, ds, r)
		}
	}
	require.Equal(t, 2+1+1, count(t, g.db.Pool, `SELECT count(*) FROM river_job WHERE args->>'event_id' <> 'evt_old'`),
		"one job per delivery of each claim won")
	for _, j := range []claim.DeliveryArgs{{EventID: "evt_a", Route: "ship"}, {EventID: "evt_a", Route: "mail"}, {EventID: "evt_b", Route: "ledger"}} {
		require.Equal(t, 1, count(t, g.db.Pool, `SELECT count(*) FROM river_job
WHERE kind = $1 AND args->>'event_id' = $2 AND args->>'route' = $3 AND max_attempts = $4 AND queue = $5`,
			claim.DeliveryKind, j.EventID, j.Route, maxAttempts(j.Route), claim.Queue(j.Route)),
			"a job with its route's max_attempts, on its route's queue: %v", j)
	}
}

// TestGroupOneBadRequest: an event the database refuses fails only its own
// request; the others of its batch are claimed and committed.
func TestGroupOneBadRequest(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	bad := event("evt_bad\x00") // text cannot hold NUL: Postgres refuses the statement
	reqs := []*request{
		{ev: event("evt_1"), routes: []string{"ship"}},
		{ev: event("evt_2"), routes: []string{"ship"}},
		{ev: bad, routes: []string{"ship"}},
		{ev: event("evt_3"), routes: []string{"ship"}},
		{ev: event("evt_4"), routes: []string{"ship"}},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)

	for _, r := range reqs {
		if r.ev.ID == bad.ID {
			require.Error(t, r.err)
			continue
		}
		require.NoError(t, r.err, r.ev.ID)
		require.Equal(t, claim.Claimed, r.res.Decision, r.ev.ID)
		_, ds := g.get(t, r.ev.ID)
		require.Len(t, ds, 1)
	}
	require.Equal(t, 5, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims`))
	require.Equal(t, 5, count(t, g.db.Pool, `SELECT count(*) FROM river_job`))
}

// TestGroupReopensAlone: a redelivery of a failed event, batched with
// others, is reopened through the single-event path, as Store.Claim would.
func TestGroupReopensAlone(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	g.claimed(t, "evt_failed", "ship")
	g.record(t, key("evt_failed", "ship"), reject)

	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{
		{ev: event("evt_failed"), routes: []string{"ship"}, reopen: true},
		{ev: event("evt_new"), routes: []string{"ship"}, reopen: true},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)
	require.NoError(t, reqs[0].err)
	require.Equal(t, claim.Reopened, reqs[0].res.Decision)
	require.Equal(t, 1, reqs[0].res.Deliveries)
	require.NoError(t, reqs[1].err)
	require.Equal(t, claim.Claimed, reqs[1].res.Decision)
	c, _ := g.get(t, "evt_failed")
	require.Equal(t, claim.Processing, c.Status)
}

// TestGroupBusinessKeysAlone: events carrying business keys, queued with
// others, are claimed through the single-event statement, which decides
// their keys: the second holder of a key has its delivery skipped.
func TestGroupBusinessKeysAlone(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{
		{ev: keyed("evt_bk_1", "ship", orderKey), routes: []string{"ship"}},
		{ev: event("evt_plain"), routes: []string{"ship"}},
	}
	g.queue(t, done, reqs[1:])
	done.Go(func() {
		reqs[0].res, reqs[0].err = g.group.Claim(context.Background(), reqs[0].ev, reqs[0].routes, false)
	})
	require.Eventually(t, func() bool {
		return count(t, g.db.Pool, `SELECT count(*) FROM webhook_business_keys`) == 1
	}, 10*time.Second, time.Millisecond, "the keyed event did not wait for the held batch")
	release()
	done.Wait()
	require.NoError(t, held.err)
	for _, r := range reqs {
		require.NoError(t, r.err)
		require.Equal(t, claim.Claimed, r.res.Decision)
	}
	require.Equal(t, []int{1, 1}, g.batchSizes(), "only the plain event went through a batch")

	res, err := g.group.Claim(t.Context(), keyed("evt_bk_2", "ship", orderKey), []string{"ship"}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"ship"}, res.Skipped, "the key's second holder is skipped, as Store.Claim decides")
	_, ds := g.get(t, "evt_bk_2")
	require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
}

// TestGroupJobMetadata: events claimed in one shared batch each enqueue
// their jobs with their own metadata (the accepting request's trace
// context), as they would claiming alone.
func TestGroupJobMetadata(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{{ev: event("evt_m1"), routes: []string{"ship", "mail"}}, {ev: event("evt_m2"), routes: []string{"ship"}}}
	for _, r := range reqs {
		r.ev.JobMetadata = []byte(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-` + map[string]string{"evt_m1": "00f067aa0ba902b7", "evt_m2": "00f067aa0ba902b8"}[r.ev.ID] + `-01"}`)
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the two events shared one batch")
	for _, r := range reqs {
		require.NoError(t, r.err)
		require.Equal(t, claim.Claimed, r.res.Decision)
		require.Equal(t, len(r.routes), count(t, g.db.Pool, `SELECT count(*) FROM river_job
WHERE args->>'event_id' = $1 AND metadata @> $2::jsonb`, r.ev.ID, string(r.ev.JobMetadata)), r.ev.ID)
	}
}
