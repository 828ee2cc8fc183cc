package claim_test

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// groupBundle is a group over a database of the test's own, recording the
// size of each batch it runs and counting the transactions it begins.
type groupBundle struct {
	*bundle
	group *claim.Group
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
	g := &groupBundle{bundle: setupDB(t)}
	g.txs = &countingDB{Pool: g.db.Pool}
	// One transaction at a time, so that holding one makes the others queue.
	g.group = claim.NewGroup(newStore(t, g.txs), claim.GroupOptions{Timeout: 5 * time.Second, Concurrency: 1, Observe: func(n int) {
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
	// A test failing before it releases must not leave the pool waiting for it.
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
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

// TestGroupOneBadRequest: events holding text the tables cannot store (a
// NUL in the id, a byte that is not UTF-8 in the Content-Type) fail only
// their own requests, with ErrUnstorable, and cost the others of their
// batch no round trip: the batch of seven is one transaction.
func TestGroupOneBadRequest(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	nul := event("evt_bad\x00") // text cannot hold NUL: Postgres would refuse the statement
	poison := event("evt_poison")
	poison.ContentType = "\xff" // nor bytes that are not UTF-8 (SQLSTATE 22021)
	reqs := []*request{
		{ev: event("evt_1"), routes: []string{"ship"}},
		{ev: event("evt_2"), routes: []string{"ship"}},
		{ev: nul, routes: []string{"ship"}},
		{ev: event("evt_3"), routes: []string{"ship"}},
		{ev: poison, routes: []string{"ship"}},
		{ev: event("evt_4"), routes: []string{"ship"}},
		{ev: event("evt_5"), routes: []string{"ship"}},
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
		_, ds := g.get(t, r.ev.ID)
		require.Len(t, ds, 1)
	}
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the seven shared one batch")
	require.EqualValues(t, 2, g.txs.begun.Load(), "one transaction for the held claim, one for the batch: none split off")
	require.Equal(t, 6, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims`))
	require.Equal(t, 6, count(t, g.db.Pool, `SELECT count(*) FROM river_job`))

	// Alone, through the store, the same events fail the same way.
	_, err := g.store.Claim(t.Context(), poison, []string{"ship"}, false)
	require.ErrorIs(t, err, claim.ErrUnstorable)
	require.ErrorContains(t, err, "the Content-Type is not UTF-8 text", "the field is named, not quoted")
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

// guarded returns stripe event id with the replay guard on and body.
func guarded(id, body string) claim.Event {
	ev := event(id)
	ev.Payload, ev.GuardBody = []byte(body), true
	return ev
}

// keyedGuarded is guarded with a business key for route ship.
func keyedGuarded(id, body string) claim.Event {
	ev := guarded(id, body)
	ev.BusinessKeys = []claim.BusinessKey{{Route: "ship", Key: orderKey}}
	return ev
}

// TestGroupReplayGuardInOneBatch: guarded events share the batch. Copies of
// one body under new ids resolve to one claim and replays, within the batch
// and against a claim committed before it; copies of one key are
// duplicates; an unguarded event with the same body claims its own key.
func TestGroupReplayGuardInOneBatch(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	res, err := g.store.Claim(t.Context(), guarded("evt_g_old", `{"old": 1}`), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)

	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	const body = `{"same": "body"}`
	encoded := guarded("evt_g_gzip", "\x1f\x8b compressed")
	encoded.ContentEncoding = "gzip"
	unguarded := event("evt_open")
	unguarded.Payload = []byte(body)
	reqs := []*request{
		{ev: guarded("evt_g_3", body), routes: []string{"ship"}},
		{ev: guarded("evt_g_1", body), routes: []string{"ship"}},
		{ev: keyedGuarded("evt_g_2", body), routes: []string{"ship"}},
		{ev: guarded("evt_g_1", body), routes: []string{"ship"}},
		{ev: guarded("evt_g_new", `{"old": 1}`), routes: []string{"ship"}},
		{ev: guarded("evt_g_old", `{"old": 1}`), routes: []string{"ship"}},
		{ev: encoded, routes: []string{"ship"}},
		{ev: unguarded, routes: []string{"ship"}},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the guarded events shared one batch")

	outcomes := map[string][]claim.Decision{}
	var sameBody []claim.Decision
	for _, r := range reqs {
		require.NoError(t, r.err, r.ev.ID)
		outcomes[r.ev.ID] = append(outcomes[r.ev.ID], r.res.Decision)
		if string(r.ev.Payload) == body && r.ev.GuardBody {
			sameBody = append(sameBody, r.res.Decision)
		}
		if r.res.Decision == claim.Replay {
			require.True(t, r.res.Duplicate())
			require.Equal(t, claim.Result{Decision: claim.Replay}, r.res, "a replay changes nothing")
		}
	}
	// Claims go in key order, so evt_g_1 wins the body; its copy is its duplicate.
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate}, outcomes["evt_g_1"])
	require.ElementsMatch(t, []claim.Decision{claim.Replay, claim.Claimed, claim.Replay, claim.Duplicate}, sameBody,
		"one claim for the body, whichever id carries it")
	require.Equal(t, []claim.Decision{claim.Replay}, outcomes["evt_g_new"], "the body of a committed claim")
	require.Equal(t, []claim.Decision{claim.Duplicate}, outcomes["evt_g_old"], "the same key is a duplicate, not a replay")
	require.Equal(t, []claim.Decision{claim.Claimed}, outcomes["evt_g_gzip"])
	require.Equal(t, []claim.Decision{claim.Claimed}, outcomes["evt_open"], "an unguarded body takes no part")

	require.Equal(t, 0, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id IN ('evt_g_2', 'evt_g_3', 'evt_g_new')`), "a replay writes no claim")
	require.Equal(t, 3, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id IN ('evt_g_1', 'evt_g_old', 'evt_g_gzip') AND body_hash = sha256(payload)`), "guarded claims hold their body's hash")
	require.Equal(t, 1, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id = 'evt_open' AND body_hash IS NULL`))
	require.Equal(t, 0, count(t, g.db.Pool, `SELECT count(*) FROM webhook_business_keys`), "a replay takes no business key")
	require.Equal(t, 1, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id = 'evt_g_gzip' AND content_encoding = 'gzip'`), "the Content-Encoding is stored, to be forwarded")
	require.Equal(t, 0, count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id <> 'evt_g_gzip' AND content_encoding <> ''`))
	require.Equal(t, 5, count(t, g.db.Pool, `SELECT count(*) FROM river_job`),
		"one job per claim won: evt_g_old, evt_hold, evt_g_1, evt_g_gzip, evt_open")
}

// TestGroupBusinessKeysInOneBatch: events with business keys share the
// batch. A key two events of the batch carry has one holder, and the
// other's delivery is skipped naming it; a key held by a claim committed
// before the batch is skipped naming that one; a missing key fails its
// delivery; a claim left with nothing to run is settled.
func TestGroupBusinessKeysInOneBatch(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	res, err := g.store.Claim(t.Context(), keyed("evt_bk_old", "ship", orderKey), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)

	const shared = `["invoice.paid","in_2"]`
	missing := event("evt_bk_missing")
	missing.BusinessKeys = []claim.BusinessKey{{Route: "ship", Missing: "business key: json:data.object.id is missing"}}
	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{
		{ev: keyed("evt_bk_b", "ship", shared), routes: []string{"ship"}},
		{ev: keyed("evt_bk_a", "ship", shared, "mail", shared), routes: []string{"ship", "mail"}},
		{ev: keyed("evt_bk_c", "ship", orderKey), routes: []string{"ship", "mail"}},
		{ev: missing, routes: []string{"ship", "mail"}},
		{ev: event("evt_plain"), routes: []string{"ship"}},
	}
	g.queue(t, done, reqs)
	release()
	done.Wait()
	require.NoError(t, held.err)
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes(), "the keyed events shared one batch")
	for _, r := range reqs {
		require.NoError(t, r.err, r.ev.ID)
	}

	// One of evt_bk_a and evt_bk_b holds the shared ship key; the other is skipped.
	var holder string
	require.NoError(t, g.db.Pool.QueryRow(t.Context(), `SELECT event_id FROM webhook_business_keys
WHERE route = 'ship' AND business_key = $1`, shared).Scan(&holder))
	require.Equal(t, 1, count(t, g.db.Pool, `SELECT count(*) FROM webhook_business_keys
WHERE route = 'mail' AND business_key = $1 AND event_id = 'evt_bk_a'`, shared), "the mail key is evt_bk_a's alone")
	var jobs []claim.DeliveryArgs
	for _, r := range reqs[:2] {
		c, ds := g.get(t, r.ev.ID)
		if r.ev.ID == holder {
			require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
			require.Nil(t, r.res.Skipped)
			continue
		}
		reason := "business key is held by stripe/" + holder
		require.Equal(t, []string{"ship"}, r.res.Skipped, r.ev.ID)
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
		require.Equal(t, reason, ds["ship"].LastError, "the in-batch holder is named")
		if r.ev.ID == "evt_bk_b" {
			require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ship"}}, r.res)
			require.Equal(t, claim.Ignored, c.Status, "all skipped: settled as ignored")
			require.Equal(t, reason, c.LastError)
		} else {
			require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Skipped: []string{"ship"}}, r.res)
		}
	}
	jobs = append(jobs, args(holder, "ship")...)
	jobs = append(jobs, args("evt_bk_a", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Skipped: []string{"ship"}}, reqs[2].res)
	_, ds := g.get(t, "evt_bk_c")
	require.Equal(t, "business key is held by stripe/evt_bk_old", ds["ship"].LastError, "the committed holder is named")
	jobs = append(jobs, args("evt_bk_c", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Unkeyed: []string{"ship"}}, reqs[3].res)
	c, ds := g.get(t, "evt_bk_missing")
	require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
	require.True(t, ds["ship"].BusinessKeyMissing)
	require.Equal(t, "business key: json:data.object.id is missing", c.LastError)
	jobs = append(jobs, args("evt_bk_missing", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1}, reqs[4].res)
	jobs = append(jobs, args("evt_plain", "ship")...)
	jobs = append(jobs, args("evt_bk_old", "ship")...)
	jobs = append(jobs, args("evt_hold", "ship")...)
	g.requireJobs(t, jobs...)
}

// TestGroupLateHolders: a batch that waits on keys another transaction
// holds, and then commits, reads what its statement's snapshot could not:
// the body's hash is held (a replay), a business key's holder is named.
func TestGroupLateHolders(t *testing.T) {
	t.Parallel()
	g := setupGroup(t)
	ctx := t.Context()
	const body = `{"late": "body"}`
	tx, err := g.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	_, err = tx.Exec(ctx, `INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, body_hash)
VALUES ('stripe', 'evt_holder', 'invoice.paid', 'processing', $1, sha256($1))`, []byte(body))
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
VALUES ('ship', sha256(convert_to($1, 'UTF8')), $1, 'stripe', 'evt_holder')`, orderKey)
	require.NoError(t, err)

	held, done, release := g.hold(t, g.db.Pool, "evt_hold")
	reqs := []*request{
		{ev: keyed("evt_late_keyed", "ship", orderKey), routes: []string{"ship"}},
		{ev: guarded("evt_late_replay", body), routes: []string{"ship"}},
	}
	g.queue(t, done, reqs)
	release()
	require.Eventually(t, func() bool {
		return g.group.Waiting() == 0 && count(t, g.db.Pool, `SELECT count(*) FROM webhook_event_claims
WHERE event_id = 'evt_hold'`) == 1 && count(t, g.db.Pool, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	}, 10*time.Second, 5*time.Millisecond, "the batch waits on the uncommitted holder")
	require.NoError(t, tx.Commit(ctx))
	done.Wait()
	require.NoError(t, held.err)
	require.Equal(t, []int{1, len(reqs)}, g.batchSizes())

	require.NoError(t, reqs[0].err)
	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ship"}}, reqs[0].res)
	c, ds := g.get(t, "evt_late_keyed")
	require.Equal(t, "business key is held by stripe/evt_holder", ds["ship"].LastError, "the late holder is named")
	require.Equal(t, "business key is held by stripe/evt_holder", c.LastError)
	require.NoError(t, reqs[1].err)
	require.Equal(t, claim.Result{Decision: claim.Replay}, reqs[1].res)
}

// TestGroupCoversEveryEventField: every field of Event is written by the
// batched statement as by Store.Claim's. A field added to Event must be
// taught to both (claimManySQL and claimSQL) before it is listed here.
func TestGroupCoversEveryEventField(t *testing.T) {
	t.Parallel()
	var fields []string
	for f := range reflect.TypeFor[claim.Event]().Fields() {
		fields = append(fields, f.Name)
	}
	require.ElementsMatch(t, []string{"Provider", "ID", "Type", "ObjectID", "ContentType", "ContentEncoding",
		"Payload", "GuardBody", "BusinessKeys", "JobMetadata"}, fields)
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
