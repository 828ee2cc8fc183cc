package claim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestWorkerSessionKeepsAnOperatorsCost connects as the worker does and
// reads random_page_cost: riverCompletionCost where the server leaves it
// at Postgres' default, the operator's own value where the database or
// DATABASE_URL sets one.
func TestWorkerSessionKeepsAnOperatorsCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.NewDB(t)
	cost := func(url string) string {
		t.Helper()
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		c, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		defer c.Close(context.Background())
		require.NoError(t, PrepareWorkerSession(ctx, c))
		var v string
		require.NoError(t, c.QueryRow(ctx, `SELECT current_setting('random_page_cost')`).Scan(&v))
		return v
	}
	var server string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT source FROM pg_settings WHERE name = 'random_page_cost'`).Scan(&server))
	require.Equal(t, "default", server, "the test server sets random_page_cost; this test needs Postgres' default")

	require.Equal(t, riverCompletionCost, cost(db.URL), "the server's default")
	require.Equal(t, "3", cost(db.URL+"&random_page_cost=3"), "DATABASE_URL's own")
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET random_page_cost = 2`, pgx.Identifier{db.Name}.Sanitize()))
	require.NoError(t, err)
	require.Equal(t, "2", cost(db.URL), "the database's own")
}

// TestRiverCompletionFindsJobsByKey runs River's own completer, through
// River's public API, on a river_job table of 20,000 finished jobs, as a
// drain's end leaves it, and reads the plan Postgres made for River's
// completion of a batch of 600 jobs (auto_explain, sent to the session as
// notices). From sessions left at the server's default cost, the batch
// joins a scan of the whole table; from the worker's sessions
// (PrepareWorkerSession), it looks each job up by its primary key.
func TestRiverCompletionFindsJobsByKey(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	_, err := db.Pool.Exec(t.Context(), `
INSERT INTO river_job (args, attempt, attempted_at, finalized_at, kind, max_attempts, priority, queue, state, scheduled_at)
SELECT jsonb_build_object('provider', 'stripe', 'event_id', 'evt_' || g, 'route', 'ship'), 1, now(), now(),
       'hookgate.delivery', 10, 1, 'route-ship', 'completed', now()
FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(t.Context(), `ANALYZE river_job`)
	require.NoError(t, err)

	defaultPlans := completionPlans(t, db.URL, nil, "default")
	require.Contains(t, strings.Join(defaultPlans, "\n"), "Seq Scan on river_job",
		"at Postgres' default cost River's completion of a large batch no longer scans river_job: "+
			"riverCompletionCost may no longer be needed (River %s)", riverChecked)

	workerPlans := completionPlans(t, db.URL, PrepareWorkerSession, "worker")
	for _, p := range workerPlans {
		p = p[strings.LastIndex(p, "\n\n")+1:] // the plan, after the statement's text
		require.NotContains(t, p, "Seq Scan on river_job", "a completion planned in a worker session:\n%s", p)
		require.Contains(t, p, "river_job_pkey", "a completion planned in a worker session:\n%s", p)
	}
}

// barrierArgs are the jobs of TestRiverCompletionFindsJobsByKey.
type barrierArgs struct {
	Round string `json:"round"`
}

func (barrierArgs) Kind() string { return "hookgate.test_barrier" }

// barrierWorker holds every job until n of them run, then lets them all
// end at once: River's completer then completes them in one batch (or two,
// should its 50 ms tick fall between them).
type barrierWorker struct {
	river.WorkerDefaults[barrierArgs]
	n       int64
	started atomic.Int64
	all     chan struct{}
	once    sync.Once
}

func (w *barrierWorker) Work(ctx context.Context, _ *river.Job[barrierArgs]) error {
	if w.started.Add(1) == w.n {
		w.once.Do(func() { close(w.all) })
	}
	select {
	case <-w.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// completionPlans inserts 600 jobs of round, has a River client whose
// connections are readied by prepare (if set) work them, and returns the
// plans auto_explain sent for River's completions of them.
func completionPlans(t *testing.T, url string, prepare func(context.Context, *pgx.Conn) error, round string) []string {
	t.Helper()
	const n = 600
	ctx := t.Context()
	var mu sync.Mutex
	var plans []string
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, notice *pgconn.Notice) {
		if strings.Contains(notice.Message, "JobSetStateIfRunningMany") {
			mu.Lock()
			plans = append(plans, notice.Message)
			mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if prepare != nil {
			if err := prepare(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_level = 'notice'`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()

	w := &barrierWorker{n: n, all: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	queue := "barrier_" + round
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Queues:  map[string]river.QueueConfig{queue: {MaxWorkers: n}},
		Workers: workers,
	})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: barrierArgs{Round: round}, InsertOpts: &river.InsertOpts{Queue: queue}}
	}
	_, err = client.InsertMany(ctx, params)
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var left int
		require.NoError(c, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state <> 'completed'`, queue).Scan(&left))
		require.Zero(c, left)
	}, 30*time.Second, 20*time.Millisecond, "River did not complete the %s round's jobs", round)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, plans, "no plan of River's completion was seen")
	return append([]string(nil), plans...)
}
