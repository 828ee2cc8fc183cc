package claim_test

import (
	"context"
	"encoding/json"
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
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// routeAttempts is the max_attempts of the routes the tests fan out to. The
// values differ so that a job carrying another route's limit is caught.
var routeAttempts = map[string]int{"ship": 10, "mail": 3, "ledger": 5}

func maxAttempts(route string) int { return routeAttempts[route] }

// queueOf is the queue a route's jobs are enqueued on: its own, or the
// default queue for a route not configured.
func queueOf(route string) string {
	if _, ok := routeAttempts[route]; ok {
		return claim.Queue(route)
	}
	return river.QueueDefault
}

// bundle is what a test needs: where its rows live (conn) and the store
// over it. Subtests may share one bundle; those that require jobs then run
// one after another, and each adds the jobs it expects to those of the
// subtests before it.
type bundle struct {
	// conn is a transaction rolled back when the test ends (setup), or the
	// pool of a database of the test's own (setupDB).
	conn  claim.DB
	db    *dbtest.DB // setupDB only
	store *claim.Store
	jobs  []claim.DeliveryArgs // every delivery job expected so far
}

// setup returns a bundle over a rolled-back transaction: cheap, and enough
// for every test that needs no second connection. The transactions of
// parallel tests share one database, and a unique index sees uncommitted
// rows: a test that claims an event id (per provider) or takes a business
// key (per route) that another test's transaction holds waits for it to
// end. Two tests that share two such values can take them in opposite
// orders and deadlock, so a test shares at most one with any other.
func setup(t *testing.T) *bundle {
	t.Helper()
	tx := dbtest.Tx(t)
	return &bundle{conn: tx, store: newStore(t, tx)}
}

// setupDB returns a bundle over a database of the test's own, for tests of
// concurrent transactions, which need commits and several connections.
func setupDB(t *testing.T) *bundle {
	t.Helper()
	db := dbtest.NewDB(t)
	return &bundle{conn: db.Pool, db: db, store: newStore(t, db.Pool)}
}

// newStore returns a store over db with an insert-only River client, as
// ingest builds it. The client inserts only in the store's transactions, so
// it needs no pool of its own.
func newStore(t *testing.T, db claim.DB) *claim.Store {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	return claim.NewStore(db, client, maxAttempts)
}

// exec runs a statement the factory has no words for (testfactory).
func (b *bundle) exec(t *testing.T, sql string, arguments ...any) {
	t.Helper()
	_, err := b.conn.Exec(t.Context(), sql, arguments...)
	require.NoError(t, err)
}

func event(id string) claim.Event {
	return claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", ObjectID: "in_1",
		ContentType: "application/json", Payload: []byte(`{"id": "` + id + `"}`)}
}

func key(id, route string) claim.Key { return claim.Key{Provider: "stripe", EventID: id, Route: route} }

func args(id string, routes ...string) []claim.DeliveryArgs {
	as := make([]claim.DeliveryArgs, len(routes))
	for i, r := range routes {
		as[i] = claim.DeliveryArgs{Provider: "stripe", EventID: id, Route: r}
	}
	return as
}

// Attempt outcomes as the worker reports them.
var (
	success = claim.AttemptResult{Status: claim.DeliveryCompleted, Attempted: true}
	retry   = claim.AttemptResult{Status: claim.DeliveryProcessing, Attempted: true, Error: "downstream answered 503"}
	reject  = claim.AttemptResult{Status: claim.DeliveryFailed, Attempted: true, Error: "downstream answered 422"}
)

// claimed claims stripe event id for routes and requires that it won.
func (b *bundle) claimed(t *testing.T, id string, routes ...string) {
	t.Helper()
	res, err := testfactory.ClaimEvent(t.Context(), b.store, event(id), routes, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)
}

// record writes one attempt's outcome, as the worker does.
func (b *bundle) record(t *testing.T, k claim.Key, r claim.AttemptResult) {
	t.Helper()
	require.NoError(t, b.store.RecordAttempt(t.Context(), k, r))
}

// get returns a stripe claim and its deliveries by route.
func (b *bundle) get(t *testing.T, id string) (claim.Record, map[string]claim.Delivery) {
	t.Helper()
	c, ds, err := b.store.Get(t.Context(), "stripe", id)
	require.NoError(t, err)
	byRoute := make(map[string]claim.Delivery, len(ds))
	for _, d := range ds {
		byRoute[d.Route] = d
	}
	return c, byRoute
}

// requireJobs adds more to the jobs expected in b's database and requires
// that exactly those delivery jobs were inserted, in any order, each with
// its route's max attempts on its route's queue. It returns the jobs' rows
// ordered by id.
func (b *bundle) requireJobs(t *testing.T, more ...claim.DeliveryArgs) []*rivertype.JobRow {
	t.Helper()
	b.jobs = append(b.jobs, more...)
	ctx := t.Context()
	tx, err := b.conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	if len(b.jobs) == 0 {
		rivertest.RequireNotInsertedTx[*riverpgxv5.Driver](ctx, t, tx, &claim.DeliveryArgs{}, nil)
		return nil
	}
	expected := make([]rivertest.ExpectedJob, len(b.jobs))
	for i := range b.jobs {
		expected[i] = rivertest.ExpectedJob{Args: &claim.DeliveryArgs{}}
	}
	rows := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, tx, expected)
	got := make([]claim.DeliveryArgs, len(rows))
	for i, row := range rows {
		require.NoError(t, json.Unmarshal(row.EncodedArgs, &got[i]))
		require.Equal(t, maxAttempts(got[i].Route), row.MaxAttempts, "max attempts of job %d (%+v)", row.ID, got[i])
		require.Equal(t, queueOf(got[i].Route), row.Queue, "queue of job %d (%+v)", row.ID, got[i])
	}
	require.ElementsMatch(t, b.jobs, got)
	return rows
}

// TestClaim's subtests share a database and run in order, each on events of
// its own.
func TestClaim(t *testing.T) {
	t.Parallel()
	b := setupDB(t)

	t.Run("WinnerGetsOneDeliveryAndOneJobPerRoute", func(t *testing.T) {
		before := time.Now()
		ev := event("evt_win")
		ev.ContentType = "application/json; charset=utf-8"
		// Odd spacing, an escaped and a raw é, keys out of order, CRLF: a
		// body re-encoded on the way would no longer match its signature.
		ev.Payload = []byte("{\"type\":\"invoice.paid\" ,  \"id\":\"evt_win\",\n\t\"name\": \"Ren\\u00e9\",\"city\":\"Orléans\" ,\"amount\" : 1.50 }\r\n")
		want := append([]byte(nil), ev.Payload...)
		require.Contains(t, string(want), `Ren\u00e9`)
		require.Contains(t, string(want), "Orl\xc3\xa9ans")

		res, err := testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship", "mail", "ledger"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 3}, res)
		require.False(t, res.Duplicate())

		c, ds := b.get(t, "evt_win")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, "invoice.paid", c.EventType)
		require.Equal(t, "in_1", c.ObjectID)
		require.Zero(t, c.AttemptCount)
		require.Empty(t, c.LastError)
		require.Nil(t, c.CompletedAt)
		require.WithinDuration(t, before, c.FirstSeenAt, time.Minute)
		require.Len(t, ds, 3)
		for _, r := range []string{"ship", "mail", "ledger"} {
			d := ds[r]
			require.Equal(t, claim.DeliveryProcessing, d.Status, r)
			require.Zero(t, d.AttemptCount, r)
			require.Nil(t, d.CompletedAt, r)
		}

		var payload []byte
		var contentType string
		require.NoError(t, b.conn.QueryRow(t.Context(), `SELECT payload, content_type FROM webhook_event_claims
WHERE provider = 'stripe' AND event_id = 'evt_win'`).Scan(&payload, &contentType))
		require.Equal(t, want, payload)
		require.Equal(t, "application/json; charset=utf-8", contentType)
		loaded, err := b.store.LoadDeliveries(t.Context(), []claim.Key{key("evt_win", "mail")})
		require.NoError(t, err)
		d := loaded[0]
		require.Equal(t, want, d.Payload, "the worker forwards exactly what was received")
		require.Equal(t, ev.ContentType, d.ContentType)

		rows := b.requireJobs(t, args("evt_win", "ship", "mail", "ledger")...)
		for _, row := range rows {
			require.Equal(t, rivertype.JobStateAvailable, row.State)
		}
	})

	t.Run("NoRouteIsIgnoredWithoutDeliveryOrJob", func(t *testing.T) {
		ev := event("evt_ignored")
		ev.ObjectID = ""
		res, err := testfactory.ClaimEvent(t.Context(), b.store, ev, nil, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.ClaimedIgnored, Status: claim.Ignored}, res)
		require.False(t, res.Duplicate())

		c, ds := b.get(t, "evt_ignored")
		require.Equal(t, claim.Ignored, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Empty(t, c.ObjectID)
		require.Empty(t, ds)
		var objectIDIsNull bool
		require.NoError(t, b.conn.QueryRow(t.Context(),
			`SELECT object_id IS NULL FROM webhook_event_claims WHERE event_id = 'evt_ignored'`).Scan(&objectIDIsNull))
		require.True(t, objectIDIsNull)
		b.requireJobs(t)
	})

	// A duplicate changes nothing, whatever the claim's status, and reports
	// that status.
	duplicates := []struct {
		id     string
		routes []string
		settle func(t *testing.T, id string) // brings the claim to status
		reopen bool
		status claim.Status
	}{
		{id: "evt_dup_processing", routes: []string{"ship", "mail"}, reopen: true,
			settle: func(t *testing.T, id string) { b.record(t, key(id, "ship"), success) },
			status: claim.Processing},
		{id: "evt_dup_completed", routes: []string{"ship", "mail"}, reopen: true,
			settle: func(t *testing.T, id string) {
				b.record(t, key(id, "ship"), success)
				b.record(t, key(id, "mail"), success)
			},
			status: claim.Completed},
		{id: "evt_dup_ignored", reopen: true, status: claim.Ignored},
		{id: "evt_dup_failed_ack", routes: []string{"ship", "mail"}, reopen: false,
			settle: func(t *testing.T, id string) {
				b.record(t, key(id, "ship"), success)
				b.record(t, key(id, "mail"), reject)
			},
			status: claim.Failed},
	}
	for _, tt := range duplicates {
		t.Run("DuplicateOf_"+string(tt.status), func(t *testing.T) {
			_, err := testfactory.ClaimEvent(t.Context(), b.store, event(tt.id), tt.routes, true)
			require.NoError(t, err)
			if tt.settle != nil {
				tt.settle(t, tt.id)
			}
			before, beforeDs := b.get(t, tt.id)
			require.Equal(t, tt.status, before.Status)

			res, err := testfactory.ClaimEvent(t.Context(), b.store, event(tt.id), tt.routes, tt.reopen)
			require.NoError(t, err)
			require.Equal(t, claim.Result{Decision: claim.Duplicate, Status: tt.status}, res)
			require.True(t, res.Duplicate())

			after, afterDs := b.get(t, tt.id)
			require.Equal(t, before, after)
			require.Equal(t, beforeDs, afterDs)
			b.requireJobs(t, args(tt.id, tt.routes...)...)
		})
	}

	t.Run("FailedWithReopenReopensOnlyFailedDeliveries", func(t *testing.T) {
		b.claimed(t, "evt_reopen", "ship", "mail", "ledger")
		b.record(t, key("evt_reopen", "ship"), success)
		b.record(t, key("evt_reopen", "mail"), retry)
		b.record(t, key("evt_reopen", "mail"), reject)
		b.record(t, key("evt_reopen", "ledger"), reject)
		c, _ := b.get(t, "evt_reopen")
		require.Equal(t, claim.Failed, c.Status)

		res, err := testfactory.ClaimEvent(t.Context(), b.store, event("evt_reopen"), []string{"ship", "mail", "ledger"}, true)
		require.NoError(t, err)
		require.Equal(t, claim.Result{Decision: claim.Reopened, Status: claim.Processing, Deliveries: 2}, res)
		require.False(t, res.Duplicate(), "a reopened event is answered as new")

		c, ds := b.get(t, "evt_reopen")
		require.Equal(t, claim.Processing, c.Status)
		require.Nil(t, c.CompletedAt)
		require.Equal(t, 4, c.AttemptCount, "reopening keeps the attempts made so far")
		require.Equal(t, claim.DeliveryCompleted, ds["ship"].Status, "a completed sibling is not re-run")
		require.NotNil(t, ds["ship"].CompletedAt)
		require.Equal(t, 1, ds["ship"].AttemptCount)
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		require.Equal(t, 2, ds["mail"].AttemptCount)
		require.Equal(t, claim.DeliveryProcessing, ds["ledger"].Status)
		b.requireJobs(t, args("evt_reopen", "ship", "mail", "ledger", "mail", "ledger")...)
	})

	t.Run("SameEventIDUnderTwoProvidersIsTwoClaims", func(t *testing.T) {
		gh := event("evt_shared")
		gh.Provider = "github"
		for _, ev := range []claim.Event{event("evt_shared"), gh} {
			res, err := testfactory.ClaimEvent(t.Context(), b.store, ev, []string{"ship"}, true)
			require.NoError(t, err)
			require.Equal(t, claim.Claimed, res.Decision, ev.Provider)
			_, ds, err := b.store.Get(t.Context(), ev.Provider, "evt_shared")
			require.NoError(t, err)
			require.Len(t, ds, 1)
		}
		b.requireJobs(t,
			claim.DeliveryArgs{Provider: "stripe", EventID: "evt_shared", Route: "ship"},
			claim.DeliveryArgs{Provider: "github", EventID: "evt_shared", Route: "ship"})
	})

	t.Run("ErrorCommitsNothing", func(t *testing.T) {
		// The same route twice violates the deliveries' primary key after
		// the claim row was inserted.
		_, err := testfactory.ClaimEvent(t.Context(), b.store, event("evt_error"), []string{"ship", "ship"}, true)
		require.ErrorContains(t, err, "claiming event stripe/evt_error")

		_, _, err = b.store.Get(t.Context(), "stripe", "evt_error")
		require.ErrorIs(t, err, claim.ErrNotFound)
		b.requireJobs(t)

		b.claimed(t, "evt_error", "ship")
		b.requireJobs(t, args("evt_error", "ship")...)
	})
}

// concurrentPool returns a pool of n connections on db, so that n callers
// reach Postgres at once instead of queueing for dbtest's few connections.
func concurrentPool(t *testing.T, db *dbtest.DB, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// claimAtOnce calls Claim n times concurrently, released together, and
// returns the results.
func claimAtOnce(t *testing.T, store *claim.Store, n int, ev claim.Event, routes []string) []claim.Result {
	t.Helper()
	results := make([]claim.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = testfactory.ClaimEvent(context.Background(), store, ev, routes, true)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return results
}

func TestClaimConcurrent(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	// 20 connections: that many calls race inside Postgres, the rest queue
	// for a connection, as under a burst of redeliveries.
	store := newStore(t, concurrentPool(t, b.db, 20))

	t.Run("OneWinnerAmongFifty", func(t *testing.T) {
		results := claimAtOnce(t, store, 50, event("evt_race"), []string{"ship", "mail"})

		outcomes := map[claim.Decision]int{}
		for _, res := range results {
			outcomes[res.Decision]++
			if res.Decision == claim.Duplicate {
				require.Equal(t, claim.Processing, res.Status)
			}
		}
		require.Equal(t, map[claim.Decision]int{claim.Claimed: 1, claim.Duplicate: 49}, outcomes)

		var claims, deliveries int
		require.NoError(t, b.conn.QueryRow(t.Context(), `SELECT
(SELECT count(*) FROM webhook_event_claims WHERE event_id = 'evt_race'),
(SELECT count(*) FROM webhook_deliveries WHERE event_id = 'evt_race')`).Scan(&claims, &deliveries))
		require.Equal(t, 1, claims)
		require.Equal(t, 2, deliveries)
		b.requireJobs(t, args("evt_race", "ship", "mail")...)
	})

	t.Run("OneReopenAmongTwenty", func(t *testing.T) {
		b.claimed(t, "evt_reopen_race", "ship", "mail")
		b.record(t, key("evt_reopen_race", "ship"), success)
		b.record(t, key("evt_reopen_race", "mail"), reject)

		results := claimAtOnce(t, store, 20, event("evt_reopen_race"), []string{"ship", "mail"})

		outcomes := map[claim.Decision]int{}
		for _, res := range results {
			outcomes[res.Decision]++
			if res.Decision == claim.Reopened {
				require.Equal(t, 1, res.Deliveries)
			}
		}
		require.Equal(t, map[claim.Decision]int{claim.Reopened: 1, claim.Duplicate: 19}, outcomes)

		c, ds := b.get(t, "evt_reopen_race")
		require.Equal(t, claim.Processing, c.Status)
		require.Equal(t, claim.DeliveryCompleted, ds["ship"].Status)
		require.Equal(t, claim.DeliveryProcessing, ds["mail"].Status)
		b.requireJobs(t, args("evt_reopen_race", "ship", "mail", "mail")...)
	})
}

// TestClaimReplayGuard: with GuardBody, the unique key on the body's hash
// decides in the claim's own statement, also between concurrent copies, and
// it goes with the claim.
func TestClaimReplayGuard(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	guarded := func(id string, body string) claim.Event {
		return claim.Event{Provider: "github", ID: id, Type: "push", Payload: []byte(body), GuardBody: true}
	}

	const copies = 20
	results := make([]claim.Result, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			res, err := testfactory.ClaimEvent(ctx, b.store, guarded(string(rune('a'+i)), `{"same": "body"}`), []string{"ship"}, true)
			require.NoError(t, err)
			results[i] = res
		})
	}
	wg.Wait()
	won := 0
	for _, r := range results {
		switch r.Decision {
		case claim.Claimed:
			won++
		case claim.Replay:
			require.True(t, r.Duplicate())
		default:
			t.Fatalf("unexpected outcome %v", r.Decision)
		}
	}
	require.Equal(t, 1, won, "one copy wins, whichever id it carries")
	var claims int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE provider = 'github'`).Scan(&claims))
	require.Equal(t, 1, claims)

	// The same key is a plain duplicate, not a replay.
	var winner string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT event_id FROM webhook_event_claims WHERE provider = 'github'`).Scan(&winner))
	res, err := testfactory.ClaimEvent(ctx, b.store, guarded(winner, `{"same": "body"}`), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Duplicate, res.Decision)

	// Unguarded events do not take part: same body, own claims.
	for _, id := range []string{"open-1", "open-2"} {
		ev := guarded(id, `{"same": "body"}`)
		ev.GuardBody = false
		res, err := testfactory.ClaimEvent(ctx, b.store, ev, nil, true)
		require.NoError(t, err)
		require.Equal(t, claim.ClaimedIgnored, res.Decision)
	}

	// Deleted with the claim.
	testfactory.DeleteClaim(ctx, t, b.db.Pool, claim.EventKey{Provider: "github", EventID: winner})
	res, err = testfactory.ClaimEvent(ctx, b.store, guarded("after-delete", `{"same": "body"}`), nil, true)
	require.NoError(t, err)
	require.Equal(t, claim.ClaimedIgnored, res.Decision)
}
