package deliver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/deliver"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// downstream records what it is sent and answers with respond.
type downstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	respond  func(n int, r *http.Request) int // n counts requests from 1
}

type recorded struct {
	header http.Header
	body   []byte
}

func newDownstream(t *testing.T, respond func(n int, r *http.Request) int) *downstream {
	t.Helper()
	d := &downstream{respond: respond}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.requests = append(d.requests, recorded{header: r.Header.Clone(), body: body})
		n := len(d.requests)
		d.mu.Unlock()
		w.WriteHeader(d.respond(n, r))
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) received() []recorded {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]recorded(nil), d.requests...)
}

func status(code int) func(int, *http.Request) int {
	return func(int, *http.Request) int { return code }
}

// bundle is what the worker tests need: where the claims live, a store, a
// River client to find jobs with, and a downstream.
type bundle struct {
	// exec is a transaction rolled back when the test ends (setup), or the
	// pool of a database of the test's own (setupDB).
	exec   claim.DB
	db     *dbtest.DB // setupDB only
	cfg    *config.Config
	store  *claim.Store
	client *river.Client[pgx.Tx]
	down   *downstream
}

// setup configures routes ship (3 attempts) and mail (1 attempt), both
// pointing at a downstream answering with respond, over a rolled-back
// transaction.
func setup(t *testing.T, respond func(n int, r *http.Request) int) bundle {
	t.Helper()
	return newBundle(t, dbtest.Tx(t), nil, respond)
}

// setupDB is setup over a database of the test's own, for tests that
// commit from several connections.
func setupDB(t *testing.T, respond func(n int, r *http.Request) int) bundle {
	t.Helper()
	db := dbtest.NewDB(t)
	return newBundle(t, db.Pool, db, respond)
}

func newBundle(t *testing.T, exec claim.DB, db *dbtest.DB, respond func(n int, r *http.Request) int) bundle {
	t.Helper()
	down := newDownstream(t, respond)
	route := func(name string, attempts int) config.Route {
		return config.Route{
			Name: name, Provider: "stripe", Events: []string{"*"}, URL: down.URL + "/" + name,
			Timeout: config.Duration(2 * time.Second), MaxAttempts: attempts,
			Backoff: config.Backoff{Initial: config.Duration(10 * time.Millisecond), Max: config.Duration(100 * time.Millisecond)},
		}
	}
	cfg := &config.Config{
		Worker: config.Worker{Concurrency: 4, RescueAfter: config.Duration(time.Minute)},
		Routes: []config.Route{route("ship", 3), route("mail", 1)},
	}
	// Over a transaction, the client is used only in it.
	var pool *pgxpool.Pool
	if db != nil {
		pool = db.Pool
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(exec, client, func(r string) int {
		rt, _ := cfg.Route(r)
		return rt.MaxAttempts
	})
	return bundle{exec: exec, db: db, cfg: cfg, store: store, client: client, down: down}
}

// claimed commits a claim of stripe event id fanned out to routes.
func (b bundle) claimed(t *testing.T, id string, routes ...string) {
	t.Helper()
	res, err := testfactory.ClaimEvent(t.Context(), b.store, claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid",
		ContentType: "application/json", Payload: []byte(`{"id":"` + id + `"}`)}, routes, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)
}

// begin returns a transaction rolled back when t ends (a savepoint of
// setup's), for the worker to work in, and a worker whose database is that
// transaction.
func (b bundle) begin(t *testing.T) (pgx.Tx, *deliver.Worker) {
	t.Helper()
	tx, err := b.exec.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return tx, w
}

// job returns the delivery job of id's route, as seen from tx.
func (b bundle) job(t *testing.T, tx pgx.Tx, id, route string) *rivertype.JobRow {
	t.Helper()
	res, err := b.client.JobListTx(t.Context(), tx, river.NewJobListParams().Kinds(claim.DeliveryKind).First(100))
	require.NoError(t, err)
	for _, j := range res.Jobs {
		var a claim.DeliveryArgs
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
		if a.EventID == id && a.Route == route {
			return j
		}
	}
	t.Fatalf("no job for %s/%s", id, route)
	return nil
}

// work runs the worker on a job inside tx, as River would.
func work(t *testing.T, tx pgx.Tx, w *deliver.Worker, job *rivertype.JobRow) (*rivertest.WorkResult, error) {
	t.Helper()
	return rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, w).WorkJob(t.Context(), t, tx, job)
}

// fetch marks job running its next attempt inside tx, as River's fetch
// does, and returns it as Work receives it.
func (b bundle) fetch(t *testing.T, tx pgx.Tx, job *rivertype.JobRow) *river.Job[claim.DeliveryArgs] {
	t.Helper()
	ctx := t.Context()
	testfactory.SetJobs(ctx, t, tx, testfactory.JobWhere{ID: job.ID},
		&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: job.Attempt + 1, AttemptedAt: testfactory.Now()})
	row, err := b.client.JobGetTx(ctx, tx, job.ID)
	require.NoError(t, err)
	var args claim.DeliveryArgs
	require.NoError(t, json.Unmarshal(row.EncodedArgs, &args))
	return &river.Job[claim.DeliveryArgs]{JobRow: row, Args: args}
}

// workEnds runs the worker on a job inside tx, as River would, for an
// attempt whose outcome hookgate ends itself (delivered, or failed for
// good): Work must return nil, and the job's row must be gone, deleted in
// the transaction that ended its delivery. River's test worker
// (rivertest.Worker, in work) cannot follow such a run: its completion
// finds no row, which fails its test, where River's own completer finds
// none and changes nothing (claim's TestRiverCompletionConformance).
func (b bundle) workEnds(t *testing.T, tx pgx.Tx, w *deliver.Worker, job *rivertype.JobRow) {
	t.Helper()
	require.NoError(t, w.Work(rivertest.WorkContext(t.Context(), b.client), b.fetch(t, tx, job)))
	b.requireEnded(t, tx, job.ID)
}

// requireEnded requires job id to have no row any more, as seen from tx.
func (b bundle) requireEnded(t *testing.T, tx pgx.Tx, id int64) {
	t.Helper()
	_, err := b.client.JobGetTx(t.Context(), tx, id)
	require.ErrorIs(t, err, rivertype.ErrNotFound, "the end deleted job %d's row with its delivery's outcome", id)
}

func delivery(t *testing.T, db claim.DB, id, route string) claim.Delivery {
	t.Helper()
	ds, err := claim.NewStore(db, nil, nil).LoadDeliveries(t.Context(), []claim.Key{{Provider: "stripe", EventID: id, Route: route}})
	require.NoError(t, err)
	require.NotNil(t, ds[0], "delivery %s of %s", route, id)
	return *ds[0]
}

func claimStatus(t *testing.T, q claim.DB, id string) claim.Status {
	t.Helper()
	var s claim.Status
	require.NoError(t, q.QueryRow(t.Context(),
		`SELECT status FROM webhook_event_claims WHERE provider = 'stripe' AND event_id = $1`, id).Scan(&s))
	return s
}

func TestWork(t *testing.T) {
	t.Parallel()

	t.Run("SuccessCompletesDeliveryAndJobTogether", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusNoContent))
		b.claimed(t, "evt_ok", "ship")
		tx, w := b.begin(t)

		b.workEnds(t, tx, w, b.job(t, tx, "evt_ok", "ship"))

		d := delivery(t, tx, "evt_ok", "ship")
		require.Equal(t, claim.DeliveryCompleted, d.Status)
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, claim.Completed, claimStatus(t, tx, "evt_ok"))

		reqs := b.down.received()
		require.Len(t, reqs, 1)
		require.Equal(t, claim.Key{Provider: "stripe", EventID: "evt_ok", Route: "ship"}.IdempotencyKey(), reqs[0].header.Get("Idempotency-Key"))
		require.Equal(t, "1", reqs[0].header.Get("Hookgate-Attempt"))
		require.Equal(t, `{"id":"evt_ok"}`, string(reqs[0].body))
	})

	t.Run("DeliveryNoLongerProcessingMakesNoCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusOK))
		b.claimed(t, "evt_done", "ship")
		// An earlier run completed the delivery, but its job lived on (it
		// was rescued and retried, say).
		require.NoError(t, b.store.RecordAttempt(t.Context(), claim.Key{Provider: "stripe", EventID: "evt_done", Route: "ship"},
			claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}))
		tx, w := b.begin(t)

		res, err := work(t, tx, w, b.job(t, tx, "evt_done", "ship"))
		require.NoError(t, err)
		require.Equal(t, river.EventKindJobCompleted, res.EventKind)
		require.Empty(t, b.down.received())
		require.Equal(t, 1, delivery(t, tx, "evt_done", "ship").AttemptCount)
	})

	t.Run("RetryableFailureIsRecordedAndRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusServiceUnavailable))
		b.claimed(t, "evt_503", "ship")
		tx, w := b.begin(t)

		res, err := work(t, tx, w, b.job(t, tx, "evt_503", "ship"))
		require.ErrorContains(t, err, "HTTP 503 Service Unavailable")
		require.Equal(t, river.EventKindJobFailed, res.EventKind)
		require.Contains(t, []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateRetryable}, res.Job.State)
		require.WithinDuration(t, time.Now(), res.Job.ScheduledAt, time.Second, "next run per the route's 10ms–100ms backoff")

		d := delivery(t, tx, "evt_503", "ship")
		require.Equal(t, claim.DeliveryProcessing, d.Status)
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, "HTTP 503 Service Unavailable", d.LastError)
	})

	t.Run("FailureOnTheLastAttemptFailsDeliveryAndEndsJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusBadGateway))
		b.claimed(t, "evt_last", "mail") // mail has max_attempts 1
		tx, w := b.begin(t)

		// The job ends in the transaction that fails the delivery.
		b.workEnds(t, tx, w, b.job(t, tx, "evt_last", "mail"))

		d := delivery(t, tx, "evt_last", "mail")
		require.Equal(t, claim.DeliveryFailed, d.Status)
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, "attempts exhausted (1 of 1): HTTP 502 Bad Gateway", d.LastError)
		require.Equal(t, claim.Failed, claimStatus(t, tx, "evt_last"))
	})

	t.Run("RejectionFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusUnprocessableEntity))
		b.claimed(t, "evt_422", "ship")
		tx, w := b.begin(t)

		b.workEnds(t, tx, w, b.job(t, tx, "evt_422", "ship"))
		d := delivery(t, tx, "evt_422", "ship")
		require.Equal(t, claim.DeliveryFailed, d.Status)
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, "HTTP 422 Unprocessable Entity", d.LastError)
	})

	t.Run("RouteNoLongerConfiguredFailsWithoutACall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusOK))
		b.claimed(t, "evt_gone", "gone")
		tx, w := b.begin(t)

		b.workEnds(t, tx, w, b.job(t, tx, "evt_gone", "gone"))
		d := delivery(t, tx, "evt_gone", "gone")
		require.Equal(t, claim.DeliveryFailed, d.Status)
		require.Zero(t, d.AttemptCount)
		require.Equal(t, `route "gone" is no longer configured`, d.LastError)
		require.Empty(t, b.down.received())
	})
}

// TestWorkAfterRescue runs Work outside rivertest, on committed rows, so
// that the "rescuer" can change the job from another connection while the
// downstream call is in flight.
func TestWorkAfterRescue(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name   string
		rescue *testfactory.JobOpts // what happens to the job during the call
		state  rivertype.JobState
	}{
		{"RescuedJobIsLeftToItsNextRun", &testfactory.JobOpts{State: rivertype.JobStateRetryable, ScheduledAt: testfactory.Ago(-time.Hour)}, rivertype.JobStateRetryable},
		{"RescuedJobAlreadyRunningAgainIsNotCompletedByTheOldRun", &testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 2, AttemptedAt: testfactory.Now()}, rivertype.JobStateRunning},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var jobID int64
			var b bundle
			b = setupDB(t, func(int, *http.Request) int {
				// The rescuer, as River runs it, from another connection.
				testfactory.SetJobs(context.Background(), t, b.db.Pool, testfactory.JobWhere{ID: jobID}, tt.rescue)
				return http.StatusOK
			})
			b.claimed(t, "evt_rescued", "ship")
			ctx := t.Context()
			var err error
			jobID = testfactory.SetJobs(ctx, t, b.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: "stripe", EventID: "evt_rescued"}},
				&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 1, AttemptedAt: testfactory.Now()})[0]
			row, err := b.client.JobGet(ctx, jobID)
			require.NoError(t, err)
			w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: b.db.Pool})
			require.NoError(t, err)
			t.Cleanup(w.Close)

			job := &river.Job[claim.DeliveryArgs]{JobRow: row, Args: claim.DeliveryArgs{Provider: "stripe", EventID: "evt_rescued", Route: "ship"}}
			require.NoError(t, w.Work(rivertest.WorkContext(ctx, b.client), job))

			require.Len(t, b.down.received(), 1)
			d := delivery(t, b.db.Pool, "evt_rescued", "ship")
			require.Equal(t, claim.DeliveryProcessing, d.Status, "the outcome belongs to the rescued run")
			require.Zero(t, d.AttemptCount)
			after, err := b.client.JobGet(ctx, jobID)
			require.NoError(t, err)
			require.Equal(t, tt.state, after.State)
		})
	}
}

// TestStaleRunEndsTheNewerRunsJob shows the race that config validation
// closes (see TestRunEndsBeforeRescue): River rescues a job during its run's
// call and starts it again (attempt 2). The old run's end finds its attempt
// fenced off and records nothing, and Work returns nil; River's executor
// then completes the job by id, as it is running, though it is the newer
// run's. That run would find its job gone and drop its outcome, and the
// reconciler would send the delivery once more. River's completion does
// not fence by attempt: only a run that returns before rescue_after is safe.
func TestStaleRunEndsTheNewerRunsJob(t *testing.T) {
	t.Parallel()
	var tx pgx.Tx
	var jobID int64
	b := setup(t, func(int, *http.Request) int {
		// The rescuer and the next fetch, while the call is in flight.
		testfactory.SetJobs(context.Background(), t, tx, testfactory.JobWhere{ID: jobID},
			&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: 2, AttemptedAt: testfactory.Now()})
		return http.StatusOK
	})
	b.claimed(t, "evt_stale", "ship")
	var w *deliver.Worker
	tx, w = b.begin(t)
	job := b.job(t, tx, "evt_stale", "ship")
	jobID = job.ID

	res, err := work(t, tx, w, job)
	require.NoError(t, err, "the stale run ends quietly")
	require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
	require.Equal(t, 2, res.Job.Attempt, "River completed the newer run's job")
	require.Equal(t, claim.DeliveryProcessing, delivery(t, tx, "evt_stale", "ship").Status,
		"and nothing recorded the outcome: the newer run will find its job gone")
}

// TestConcurrentDeliveriesOfOneClaim completes a claim's two deliveries from
// two transactions at once: whichever records second sees the first's
// committed outcome (under the claim row's lock) and completes the claim.
func TestConcurrentDeliveriesOfOneClaim(t *testing.T) {
	t.Parallel()
	b := setupDB(t, status(http.StatusOK))
	b.claimed(t, "evt_fan", "ship", "mail")

	t.Run("Deliveries", func(t *testing.T) {
		for _, route := range []string{"ship", "mail"} {
			t.Run(route, func(t *testing.T) {
				t.Parallel()
				tx, err := b.db.Pool.Begin(t.Context())
				require.NoError(t, err)
				defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
				w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
				require.NoError(t, err)
				t.Cleanup(w.Close)
				b.workEnds(t, tx, w, b.job(t, tx, "evt_fan", route))
				require.NoError(t, tx.Commit(t.Context()))
			})
		}
	})

	c, ds, err := b.store.Get(t.Context(), "stripe", "evt_fan")
	require.NoError(t, err)
	require.Equal(t, claim.Completed, c.Status)
	require.Equal(t, 2, c.AttemptCount)
	for _, d := range ds {
		require.Equal(t, claim.DeliveryCompleted, d.Status, d.Route)
	}
}

// TestHookgateAttemptNeverRepeats: a run after a crashed one (River counted
// the crashed attempt when it fetched the job) sends the next number, and a
// reopen's new job continues after the numbers of the job before it.
func TestHookgateAttemptNeverRepeats(t *testing.T) {
	t.Parallel()
	b := setupDB(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusUnprocessableEntity // fails the delivery at once
		}
		return http.StatusOK
	})
	ctx := t.Context()
	b.claimed(t, "evt_num", "ship")
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: b.db.Pool})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	// runAs runs the job that is not yet finalized as River's fetch number attempt would.
	runAs := func(attempt int) {
		t.Helper()
		// A delivery's end deletes its job's row: the one left is the job not yet finalized.
		ids := testfactory.SetJobs(ctx, t, b.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: "stripe", EventID: "evt_num", Route: "ship"}},
			&testfactory.JobOpts{State: rivertype.JobStateRunning, Attempt: attempt, AttemptedAt: testfactory.Now()})
		require.Len(t, ids, 1)
		row, err := b.client.JobGet(ctx, ids[0])
		require.NoError(t, err)
		job := &river.Job[claim.DeliveryArgs]{JobRow: row, Args: claim.DeliveryArgs{Provider: "stripe", EventID: "evt_num", Route: "ship"}}
		require.NoError(t, w.Work(rivertest.WorkContext(ctx, b.client), job))
	}

	runAs(2) // the first fetch's run was killed mid-call, unrecorded
	require.Equal(t, claim.DeliveryFailed, delivery(t, b.db.Pool, "evt_num", "ship").Status)
	n, err := b.store.Reopen(ctx, "stripe", "evt_num", false)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	runAs(1) // the reopen's job, first fetch
	require.Equal(t, claim.DeliveryCompleted, delivery(t, b.db.Pool, "evt_num", "ship").Status)

	var got []string
	for _, r := range b.down.received() {
		got = append(got, r.header.Get("Hookgate-Attempt"))
	}
	require.Equal(t, []string{"2", "3"}, got)
}

// A route's concurrency bounds its calls, not River's slots: a job whose
// route has every call in flight waits for one, up to callWait, then goes
// back to the queue snoozed, having sent nothing.
func TestJobWaitsForACallSlotThenSnoozes(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var unhold sync.Once
	release := func() { unhold.Do(func() { close(hold) }) }
	b := setupDB(t, func(n int, _ *http.Request) int {
		if n == 1 {
			<-hold
		}
		return http.StatusOK
	})
	t.Cleanup(release) // before the downstream closes, should an assertion fail
	b.cfg.Routes[0].Concurrency = 1
	b.cfg.Worker.RescueAfter = config.Duration(2 * time.Second) // callWait 50ms
	b.claimed(t, "evt_a", "ship")
	b.claimed(t, "evt_b", "ship")

	txA, err := b.db.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer txA.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
	txB, err := b.db.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer txB.Rollback(context.Background()) //nolint:errcheck // rolled back
	// One worker for both jobs: the call slots are its own. Only job A's run
	// touches the worker's database, A's transaction.
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: txA})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	jobA, jobB := b.job(t, txA, "evt_a", "ship"), b.job(t, txB, "evt_b", "ship")

	done := make(chan error, 1)
	fetchedA := b.fetch(t, txA, jobA)
	go func() { done <- w.Work(rivertest.WorkContext(context.Background(), b.client), fetchedA) }()
	require.Eventually(t, func() bool { return len(b.down.received()) == 1 }, 30*time.Second, 5*time.Millisecond,
		"job A's call reaches the downstream")

	res, err := work(t, txB, w, jobB)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobSnoozed, res.EventKind, "job B waited for the one call slot, then went back")
	require.Len(t, b.down.received(), 1, "job B sent nothing")

	release()
	select {
	case err := <-done:
		require.NoError(t, err)
		b.requireEnded(t, txA, jobA.ID)
	case <-time.After(30 * time.Second):
		t.Fatal("job A did not finish")
	}
}

func TestDeliveredLinesAreSampledAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, status(http.StatusNoContent))
	ids := []string{"evt_l1", "evt_l2", "evt_l3", "evt_l4", "evt_l5", "evt_l6"}
	for _, id := range ids {
		b.claimed(t, id, "ship")
	}
	tx, err := b.exec.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var out proctest.Buffer
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx, Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	clock := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	w.SetLineBudget(2, func() time.Time { return clock })

	for _, id := range ids[:5] {
		b.workEnds(t, tx, w, b.job(t, tx, id, "ship"))
	}
	clock = clock.Add(time.Second)
	b.workEnds(t, tx, w, b.job(t, tx, ids[5], "ship"))

	var delivered []map[string]any
	var summaries []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		switch m["msg"] {
		case "delivered":
			delivered = append(delivered, m)
		case "delivery lines over the budget were counted, not written":
			summaries = append(summaries, m)
		}
	}
	// Two of the first second's five, then the next second's first.
	require.Len(t, delivered, 3)
	for i, m := range delivered {
		require.Equal(t, []string{ids[0], ids[1], ids[5]}[i], m["event_id"])
		// The job's attributes, kept unformatted until the line is written.
		for _, k := range []string{"provider", "route", "job_id", "attempt", "duration", "status"} {
			require.Contains(t, m, k)
		}
		require.Equal(t, "stripe", m["provider"])
		require.Equal(t, "ship", m["route"])
		require.EqualValues(t, 204, m["status"])
	}
	require.Len(t, summaries, 1)
	require.EqualValues(t, 3, summaries[0]["not_logged"])
	require.Equal(t, map[string]any{"delivered": float64(3)}, summaries[0]["by_result"])
	// Every delivery is completed whether its line was written or not.
	for _, id := range ids {
		require.Equal(t, claim.DeliveryCompleted, delivery(t, tx, id, "ship").Status)
	}
}

// Each attempt's history row keeps what was sent and the answer's
// headers, and its place in its run of attempts.
func TestAttemptHistoryKeepsTheRequestAndTheAnswersHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, status(http.StatusServiceUnavailable))
	b.claimed(t, "evt_full", "ship")
	tx, w := b.begin(t)
	_, err := work(t, tx, w, b.job(t, tx, "evt_full", "ship"))
	require.ErrorContains(t, err, "HTTP 503")

	as, err := claim.NewStore(tx, nil, nil).Attempts(t.Context(), "stripe", "evt_full", true)
	require.NoError(t, err)
	require.Len(t, as["ship"], 1)
	a := as["ship"][0]
	require.NotNil(t, a.Request)
	require.Equal(t, http.MethodPost, a.Request.Method)
	require.Equal(t, b.down.URL+"/ship", a.Request.URL)
	require.Equal(t, []string{"1"}, a.Request.Headers["Hookgate-Attempt"])
	require.Equal(t, []string{"0"}, a.ResponseHeaders["Content-Length"])
	require.NotEmpty(t, a.ResponseHeaders["Date"])
	require.Equal(t, 1, *a.RunAttempt)
	require.Equal(t, 3, *a.RunMax)
}

// TestBreakerHoldsJobsBack runs jobs of a route whose circuit is open: a
// job is snoozed without a call while the cool-down runs (River gives its
// attempt back), a job on its last attempt leaves the due probe to one
// with attempts left, and a job with attempts left takes it, and its
// delivery closes the circuit.
func TestBreakerHoldsJobsBack(t *testing.T) {
	t.Parallel()
	b := setupDB(t, status(http.StatusOK))
	b.cfg.Routes[0].Breaker = config.Breaker{Failures: 1, CoolDown: config.Duration(time.Hour), MaxCoolDown: config.Duration(time.Hour)}
	b.claimed(t, "evt_a", "ship")
	ch, err := b.store.BreakerApply(t.Context(), "ship", claim.BreakerFailed, claim.BreakerSettings{Failures: 1, CoolDown: 300 * time.Millisecond,
		MaxCoolDown: time.Hour}, nil)
	require.NoError(t, err)
	require.Equal(t, claim.BreakerOpen, ch.State)

	run := func(attempt int) *rivertest.WorkResult {
		t.Helper()
		tx, err := b.db.Pool.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
		w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
		require.NoError(t, err)
		defer w.Close()
		job := b.job(t, tx, "evt_a", "ship")
		job.Attempt = attempt - 1 // River adds one as it fetches the job
		res, err := work(t, tx, w, job)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(t.Context()))
		return res
	}
	res := run(1)
	require.Equal(t, river.EventKindJobSnoozed, res.EventKind, "held back while open")
	require.Empty(t, b.down.received(), "nothing sent while open")

	bs, err := b.store.Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return time.Now().After(*bs["ship"].NextProbeAt) }, 5*time.Second, 10*time.Millisecond)
	res = run(3)
	require.Equal(t, river.EventKindJobSnoozed, res.EventKind, "a last attempt leaves the probe to others at first")
	require.Empty(t, b.down.received())

	tx, err := b.db.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	job := b.job(t, tx, "evt_a", "ship")
	job.Attempt = 0           // a first attempt, as a job with attempts left
	b.workEnds(t, tx, w, job) // the probe is sent and delivers
	require.NoError(t, tx.Commit(t.Context()))
	require.Len(t, b.down.received(), 1)
	bs, err = b.store.Breakers(t.Context(), []string{"ship"})
	require.NoError(t, err)
	require.Equal(t, claim.BreakerClosed, bs["ship"].State)
}

// TestBreakerOffSendsWhateverTheRow: a route with breaker: off is sent to
// even when its row says open (left from before it was turned off).
func TestBreakerOffSendsWhateverTheRow(t *testing.T) {
	t.Parallel()
	b := setupDB(t, status(http.StatusOK))
	b.cfg.Routes[0].Breaker = config.Breaker{Off: true}
	b.claimed(t, "evt_off", "ship")
	_, err := b.store.BreakerApply(t.Context(), "ship", claim.BreakerFailed, claim.BreakerSettings{Failures: 1, CoolDown: time.Hour,
		MaxCoolDown: time.Hour}, nil)
	require.NoError(t, err)
	tx, err := b.db.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // rolled back
	w, err := deliver.NewWorker(deliver.Options{Config: b.cfg, DB: tx})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	b.workEnds(t, tx, w, b.job(t, tx, "evt_off", "ship"))
	require.Len(t, b.down.received(), 1)
}
