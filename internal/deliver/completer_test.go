package deliver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// gatedDB holds the first batch of statements (each a transaction of its
// own) until the gate opens, and counts them.
type gatedDB struct {
	claim.DB
	gate    chan struct{}
	batches atomic.Int32
}

func (g *gatedDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if g.batches.Add(1) == 1 {
		<-g.gate
	}
	return g.DB.SendBatch(ctx, b)
}

// TestCompleterSharesTransactions ends many jobs at once: while the first
// end's transaction is held, the others queue, and then end together in one
// transaction. Within that batch a job River rescued meanwhile is left alone,
// a delivery settled elsewhere is not overwritten, and sibling deliveries of
// one claim roll it up to completed.
func TestCompleterSharesTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, client, func(string) int { return 5 })

	var keys []claim.Key
	for i := range 6 {
		id := fmt.Sprintf("evt_%d", i)
		_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "p", ID: id, Type: "t", Payload: []byte("{}")}, []string{"r"}, false)
		require.NoError(t, err)
		keys = append(keys, claim.Key{Provider: "p", EventID: id, Route: "r"})
	}
	_, err = testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "p", ID: "evt_fan", Type: "t", Payload: []byte("{}")}, []string{"r", "s"}, false)
	require.NoError(t, err)
	keys = append(keys, claim.Key{Provider: "p", EventID: "evt_fan", Route: "r"}, claim.Key{Provider: "p", EventID: "evt_fan", Route: "s"})

	// Every job is running its first attempt, as River would have it.
	running := &testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()}
	jobs := make([]*river.Job[claim.DeliveryArgs], len(keys))
	for i, k := range keys {
		id := testfactory.SetJobs(ctx, t, db.Pool, testfactory.JobWhere{Delivery: k}, running)[0]
		row, err := client.JobGet(ctx, id)
		require.NoError(t, err)
		jobs[i] = &river.Job[claim.DeliveryArgs]{JobRow: row, Args: claim.DeliveryArgs(k)}
	}
	const rescuedIdx, settledIdx = 2, 4
	testfactory.SetJobs(ctx, t, db.Pool, testfactory.JobWhere{ID: jobs[rescuedIdx].ID}, &testfactory.JobOpts{Attempt: 2})
	testfactory.SetDelivery(ctx, t, db.Pool, keys[settledIdx], &testfactory.DeliveryOpts{Status: claim.DeliveryFailed, LastError: "by an operator"})

	gdb := &gatedDB{DB: db.Pool, gate: make(chan struct{})}
	c := newCompleter(gdb, nil, 10*time.Second, noChain, nil)
	c.batch.Concurrency = 1 // so that holding one transaction makes the others queue
	results := make([]endResult, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	wctx := rivertest.WorkContext(ctx, client)
	end := func(i int) {
		wg.Go(func() {
			results[i], errs[i] = c.end(wctx, jobs[i], claim.Attempt{Key: keys[i],
				Result: claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}})
		})
	}
	end(0)
	require.Eventually(t, func() bool { return gdb.batches.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the first end's transaction is held")
	for i := 1; i < len(keys); i++ {
		end(i)
	}
	require.Eventually(t, func() bool {
		return c.batch.Waiting() == len(keys)-1
	}, 10*time.Second, time.Millisecond, "all but the leader's end are queued behind its transaction")
	close(gdb.gate)
	wg.Wait()

	require.Equal(t, int32(2), gdb.batches.Load(), "the queued ends shared one transaction")
	for i, k := range keys {
		require.NoError(t, errs[i])
		var status string
		var attempts int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, attempt_count FROM webhook_deliveries
WHERE provider = $1 AND event_id = $2 AND route = $3`, k.Provider, k.EventID, k.Route).Scan(&status, &attempts))
		job, err := client.JobGet(ctx, jobs[i].ID)
		switch i {
		case rescuedIdx:
			require.NoError(t, err)
			require.Equal(t, rescued, results[i])
			require.Equal(t, "processing", status, "the rescued run owns the delivery")
			require.Zero(t, attempts)
			require.Equal(t, rivertype.JobStateRunning, job.State, "the rescued copy's job is not ended by the old run")
		case settledIdx:
			require.Equal(t, settled, results[i])
			require.Equal(t, "failed", status)
			require.ErrorIs(t, err, rivertype.ErrNotFound, "the job's row is deleted by its end")
		default:
			require.Equal(t, ended, results[i], k)
			require.Equal(t, "completed", status)
			require.Equal(t, 1, attempts)
			require.ErrorIs(t, err, rivertype.ErrNotFound, "the job's row is deleted with its delivery's outcome")
		}
	}
	var fan string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM webhook_event_claims WHERE event_id = 'evt_fan'`).Scan(&fan))
	require.Equal(t, "completed", fan, "siblings settled in one batch roll their claim up together")
}

// panickyDB panics when statements are sent.
type panickyDB struct{ claim.DB }

func (panickyDB) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { panic("boom") }

// TestCompleterSurvivesAPanic: a panic while ending jobs fails those ends
// with an error instead of leaving them, and every later end, waiting.
func TestCompleterSurvivesAPanic(t *testing.T) {
	t.Parallel()
	c := newCompleter(panickyDB{}, nil, 10*time.Second, noChain, nil)
	job := &river.Job[claim.DeliveryArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, State: rivertype.JobStateRunning}}
	for range 2 {
		res, err := c.end(context.Background(), job, claim.Attempt{Key: claim.Key{Provider: "p", EventID: "e", Route: "r"}})
		require.Equal(t, failedToRecord, res)
		require.ErrorContains(t, err, "panicked: boom", "the second end ran too: the first released the batch")
	}
}

// noChain is a configuration's HasDependents with no after anywhere.
func noChain(string) bool { return false }
