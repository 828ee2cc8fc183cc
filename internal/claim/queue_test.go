package claim_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestQueue pins each route's queue name and asks River itself whether it
// takes it: River checks a queue's name at insert. A name Queue hashes is
// one River refuses in its readable form.
func TestQueue(t *testing.T) {
	t.Parallel()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	insert := func(t *testing.T, route, queue string) error {
		t.Helper()
		_, err := client.InsertTx(t.Context(), dbtest.Tx(t), claim.DeliveryArgs{Provider: "p", EventID: "e", Route: route},
			&river.InsertOpts{Queue: queue})
		return err
	}

	long := strings.Repeat("a", 63)
	for _, tt := range []struct{ route, want string }{
		{"ship-order", "route-ship-order"},
		{"ship_order", "route-ship_order"},
		{"s", "route-s"},
		{"0", "route-0"},
		{"default", "route-default"},
		{strings.Repeat("a", 58), "route-" + strings.Repeat("a", 58)},
		// Not valid in a queue name, or too long with the prefix: the first
		// 16 bytes of the name's SHA-256, in hex.
		{"ship--order", "routeh-17ddc9489b1695ed8d2ff781fd5bbcfc"},
		{"ship-", "routeh-a79afadb9573b14fd35bfc420cd5cd73"},
		{"ship_", "routeh-64c8eb85908be8806370c4f51da4797b"},
		{"a-_b", "routeh-0eb1004d621a301d41475a7bc842ef8d"},
		{strings.Repeat("a", 59), "routeh-111bb261277afd65f0744b247cd3e47d"},
		{long, "routeh-7d3e74a05d7db15bce4ad9ec0658ea98"},
	} {
		t.Run(tt.route, func(t *testing.T) {
			t.Parallel()
			got := claim.Queue(tt.route)
			// Pinned: every process and version must agree on a route's queue.
			require.Equal(t, tt.want, got)
			require.NoError(t, insert(t, tt.route, got), "River takes queue %q", got)
			if strings.HasPrefix(got, "routeh-") {
				require.Error(t, insert(t, tt.route, "route-"+tt.route), "River refuses the readable form of %q", tt.route)
			}
		})
	}

	t.Run("DistinctRoutesDistinctQueues", func(t *testing.T) {
		t.Parallel()
		seen := map[string]string{}
		for _, r := range []string{"ship", "ship-", "ship_", "ship--", "h-ship", "ship-order", "ship_order",
			"ship--order", "ship__order", "default", long, long[:62], long[:58], long[:59]} {
			q := claim.Queue(r)
			require.NotContains(t, seen, q, "%q and %q share queue %q", seen[q], r, q)
			require.NotEqual(t, river.QueueDefault, q)
			seen[q] = r
		}
	})
}

// queueOfJob returns the queue of the stripe delivery job of id for route.
func (b *bundle) queueOfJob(t *testing.T, id, route string) string {
	t.Helper()
	jobs := testfactory.Jobs(t.Context(), t, b.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: "stripe", EventID: id, Route: route}})
	require.Len(t, jobs, 1)
	return jobs[0].Queue
}

func TestMoveJobsToRouteQueues(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	const onDefault = river.QueueDefault

	// Enqueued before routes had queues: on the default queue.
	b.claimed(t, "evt_old", "ship", "mail")
	b.job(t, "evt_old", "ship", &testfactory.JobOpts{Queue: onDefault})
	b.job(t, "evt_old", "mail", &testfactory.JobOpts{Queue: onDefault, State: rivertype.JobStateRetryable, ScheduledAt: testfactory.In(time.Minute)})
	// Being attempted on the default queue: left where it runs.
	b.claimed(t, "evt_running", "ship")
	b.job(t, "evt_running", "ship", &testfactory.JobOpts{Queue: onDefault, State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()})
	// Already on its queue.
	b.claimed(t, "evt_new", "ship")
	// On the queue of a route that is no longer configured: to the default
	// queue, which workers still work.
	b.claimed(t, "evt_removed", "ledger")
	require.Equal(t, claim.Queue("ledger"), b.queueOfJob(t, "evt_removed", "ledger"))
	// Finished on the default queue: history, left alone.
	b.claimed(t, "evt_done", "mail")
	b.job(t, "evt_done", "mail", &testfactory.JobOpts{Queue: onDefault, State: rivertype.JobStateCompleted, Attempt: 1, FinalizedAt: testfactory.Now()})

	configured := []string{"ship", "mail"}
	moved, err := b.store.MoveJobsToRouteQueues(ctx, configured)
	require.NoError(t, err)
	require.Equal(t, 3, moved)
	require.Equal(t, claim.Queue("ship"), b.queueOfJob(t, "evt_old", "ship"))
	require.Equal(t, claim.Queue("mail"), b.queueOfJob(t, "evt_old", "mail"))
	require.Equal(t, river.QueueDefault, b.queueOfJob(t, "evt_running", "ship"))
	require.Equal(t, claim.Queue("ship"), b.queueOfJob(t, "evt_new", "ship"))
	require.Equal(t, river.QueueDefault, b.queueOfJob(t, "evt_removed", "ledger"))
	require.Equal(t, river.QueueDefault, b.queueOfJob(t, "evt_done", "mail"))

	moved, err = b.store.MoveJobsToRouteQueues(ctx, configured)
	require.NoError(t, err)
	require.Zero(t, moved, "nothing left to move")

	t.Run("MovesABacklogInBatches", func(t *testing.T) {
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{TestOnly: true})
		require.NoError(t, err)
		const n = 2500 // more than two batches
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{
				Args:       claim.DeliveryArgs{Provider: "stripe", EventID: fmt.Sprintf("evt_backlog_%d", i), Route: "ship"},
				InsertOpts: &river.InsertOpts{Queue: river.QueueDefault},
			}
		}
		_, err = client.InsertMany(ctx, params)
		require.NoError(t, err)
		moved, err := b.store.MoveJobsToRouteQueues(ctx, configured)
		require.NoError(t, err)
		require.Equal(t, n, moved)
		for _, j := range testfactory.Jobs(ctx, t, b.db.Pool, testfactory.JobWhere{Kind: claim.DeliveryKind, State: rivertype.JobStateAvailable}) {
			var a claim.DeliveryArgs
			require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
			require.False(t, a.Route == "ship" && j.Queue == river.QueueDefault, "job %d of ship is left on the default queue", j.ID)
		}
	})
}

func TestRouteStates(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	queues, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)

	// ship: two deliveries waiting, one running, one failed, one completed.
	b.claimed(t, "evt_1", "ship", "mail")
	b.claimed(t, "evt_2", "ship")
	b.claimed(t, "evt_3", "ship")
	b.job(t, "evt_3", "ship", &testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()})
	b.claimed(t, "evt_4", "ship")
	b.record(t, key("evt_4", "ship"), reject)
	b.job(t, "evt_4", "ship", completeJob)
	b.claimed(t, "evt_5", "ship")
	b.record(t, key("evt_5", "ship"), success)
	b.job(t, "evt_5", "ship", completeJob)
	// mail: evt_1's delivery waits for a retry; one is queued on the
	// default queue from before routes had queues.
	b.record(t, key("evt_1", "mail"), retry)
	b.job(t, "evt_1", "mail", &testfactory.JobOpts{State: rivertype.JobStateRetryable, Attempt: 1, ScheduledAt: testfactory.In(time.Minute)})
	b.claimed(t, "evt_6", "mail")
	b.job(t, "evt_6", "mail", &testfactory.JobOpts{Queue: river.QueueDefault})

	states, err := b.store.RouteStates(ctx, queues, []string{"ship", "mail", "ledger"})
	require.NoError(t, err)
	closed := claim.Breaker{State: claim.BreakerClosed} // no failure counted yet
	require.Equal(t, []claim.RouteState{
		{Route: "ship", Queue: "route-ship", Processing: 3, Failed: 1, Available: 2, Running: 1, Breaker: closed},
		{Route: "mail", Queue: "route-mail", Processing: 2, Available: 1, Retryable: 1, Breaker: closed},
		{Route: "ledger", Queue: "route-ledger", Breaker: closed},
	}, states)
	require.Equal(t, 2, states[0].QueuedJobs())
	require.Equal(t, 2, states[1].QueuedJobs())

	t.Run("PauseAndResume", func(t *testing.T) {
		// mail's queue was never run by a worker: pausing registers it.
		_, err := queues.QueueGet(ctx, claim.Queue("mail"))
		require.ErrorIs(t, err, rivertype.ErrNotFound)
		require.NoError(t, b.store.PauseRoute(ctx, queues, "mail"))
		q, err := queues.QueueGet(ctx, claim.Queue("mail"))
		require.NoError(t, err)
		require.NotNil(t, q.PausedAt, "paused in River's own queue table")
		require.NoError(t, b.store.PauseRoute(ctx, queues, "mail"), "pausing twice is harmless")

		states, err := b.store.RouteStates(ctx, queues, []string{"ship", "mail"})
		require.NoError(t, err)
		require.False(t, states[0].Paused)
		require.True(t, states[1].Paused)
		require.NotNil(t, states[1].PausedAt)
		require.Equal(t, 2, states[1].QueuedJobs(), "pausing keeps the backlog")

		was, err := b.store.ResumeRoute(ctx, queues, "mail")
		require.NoError(t, err)
		require.True(t, was)
		q, err = queues.QueueGet(ctx, claim.Queue("mail"))
		require.NoError(t, err)
		require.Nil(t, q.PausedAt)
		was, err = b.store.ResumeRoute(ctx, queues, "mail")
		require.NoError(t, err)
		require.False(t, was, "it was not paused any more")
		was, err = b.store.ResumeRoute(ctx, queues, "ledger")
		require.NoError(t, err)
		require.False(t, was, "a queue never run nor paused")

		_, ds := b.get(t, "evt_6")
		require.Zero(t, ds["mail"].AttemptCount, "pause and resume count no attempt")
	})
}
