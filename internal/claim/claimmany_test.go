package claim_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// request is one event of a ClaimMany call.
type request struct {
	ev     claim.Event
	routes []string
	reopen bool
	res    claim.Result
	err    error
}

// claimMany claims reqs in one ClaimMany, then resolves each result alone
// as ingest's group does (Resolve), and requires the batch to succeed.
func (b *bundle) claimMany(t *testing.T, reqs []*request) {
	t.Helper()
	require.NoError(t, b.tryClaimMany(reqs))
}

// tryClaimMany is claimMany, returning the batch's error.
func (b *bundle) tryClaimMany(reqs []*request) error {
	in := make([]claim.Request, len(reqs))
	for i, r := range reqs {
		in[i] = claim.Request{Event: r.ev, Routes: r.routes}
	}
	res, err := b.store.ClaimMany(context.Background(), in)
	if err != nil {
		return err
	}
	for i, r := range reqs {
		r.res, r.err = b.store.Resolve(context.Background(), in[i], r.reopen, res[i])
	}
	return nil
}

func count(t *testing.T, db claim.DB, sql string, arguments ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(t.Context(), sql, arguments...).Scan(&n))
	return n
}

// TestClaimManyDuplicatesInOneBatch: copies of one key in the same batch
// resolve to one claim (with its deliveries and jobs) and duplicates; all
// the batch's events commit together.
func TestClaimManyDuplicatesInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_old", "ship")

	reqs := []*request{
		{ev: event("evt_dup_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_dup_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_dup_a"), routes: []string{"ship", "mail"}},
		{ev: event("evt_dup_b"), routes: []string{"ledger"}},
		{ev: event("evt_dup_b"), routes: []string{"ledger"}},
		{ev: event("evt_none")},
		{ev: event("evt_old"), routes: []string{"ship"}},
	}
	b.claimMany(t, reqs)

	outcomes := map[string][]claim.Decision{}
	for _, r := range reqs {
		require.NoError(t, r.err)
		outcomes[r.ev.ID] = append(outcomes[r.ev.ID], r.res.Decision)
	}
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate, claim.Duplicate}, outcomes["evt_dup_a"])
	require.ElementsMatch(t, []claim.Decision{claim.Claimed, claim.Duplicate}, outcomes["evt_dup_b"])
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

	for id, routes := range map[string][]string{"evt_dup_a": {"mail", "ship"}, "evt_dup_b": {"ledger"}, "evt_none": nil} {
		c, ds := b.get(t, id)
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
	// One job per delivery of each claim won (evt_old's from before), each
	// with its route's max_attempts, on its route's queue.
	b.requireJobs(t, slices.Concat(args("evt_old", "ship"), args("evt_dup_a", "ship", "mail"), args("evt_dup_b", "ledger"))...)
}

// TestClaimManyReopensAlone: a redelivery of a failed event, batched with
// others, is left to Resolve, which reopens it alone.
func TestClaimManyReopensAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.claimed(t, "evt_reopen_failed", "ship")
	b.record(t, key("evt_reopen_failed", "ship"), reject)

	reqs := []*request{
		{ev: event("evt_reopen_failed"), routes: []string{"ship"}, reopen: true},
		{ev: event("evt_reopen_new"), routes: []string{"ship"}, reopen: true},
	}
	b.claimMany(t, reqs)
	require.NoError(t, reqs[0].err)
	require.Equal(t, claim.Reopened, reqs[0].res.Decision)
	require.Equal(t, 1, reqs[0].res.Deliveries)
	require.NoError(t, reqs[1].err)
	require.Equal(t, claim.Claimed, reqs[1].res.Decision)
	c, _ := b.get(t, "evt_reopen_failed")
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

// TestClaimManyReplayGuardInOneBatch: guarded events share the batch. Copies of
// one body under new ids resolve to one claim and replays, within the batch
// and against a claim committed before it; copies of one key are
// duplicates; an unguarded event with the same body claims its own key.
func TestClaimManyReplayGuardInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := testfactory.ClaimEvent(t.Context(), b.store, guarded("evt_g_old", `{"old": 1}`), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)

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
	b.claimMany(t, reqs)

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

	require.Equal(t, 0, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims
WHERE event_id IN ('evt_g_2', 'evt_g_3', 'evt_g_new')`), "a replay writes no claim")
	require.Equal(t, 3, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims
WHERE event_id IN ('evt_g_1', 'evt_g_old', 'evt_g_gzip') AND body_hash = sha256(payload)`), "guarded claims hold their body's hash")
	require.Equal(t, 1, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims
WHERE event_id = 'evt_open' AND body_hash IS NULL`))
	require.Equal(t, 0, count(t, b.conn, `SELECT count(*) FROM webhook_business_keys`), "a replay takes no business key")
	require.Equal(t, 1, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims
WHERE event_id = 'evt_g_gzip' AND content_encoding = 'gzip'`), "the Content-Encoding is stored, to be forwarded")
	require.Equal(t, 0, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims
WHERE event_id <> 'evt_g_gzip' AND content_encoding <> ''`))
	// One job per claim won.
	b.requireJobs(t, slices.Concat(args("evt_g_old", "ship"), args("evt_g_1", "ship"), args("evt_g_gzip", "ship"), args("evt_open", "ship"))...)
}

// TestClaimManyBusinessKeysInOneBatch: events with business keys share the
// batch. A key two events of the batch carry has one holder, and the
// other's delivery is skipped naming it; a key held by a claim committed
// before the batch is skipped naming that one; a missing key fails its
// delivery; a claim left with nothing to run is settled.
func TestClaimManyBusinessKeysInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const batchOrderKey = `["invoice.paid","in_batch"]`
	res, err := testfactory.ClaimEvent(t.Context(), b.store, keyed("evt_bkm_old", "ship", batchOrderKey), []string{"ship"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Decision)

	const shared = `["invoice.paid","in_2"]`
	missing := event("evt_bkm_missing")
	missing.BusinessKeys = []claim.BusinessKey{{Route: "ship", Missing: "business key: json:data.object.id is missing"}}
	reqs := []*request{
		{ev: keyed("evt_bkm_b", "ship", shared), routes: []string{"ship"}},
		{ev: keyed("evt_bkm_a", "ship", shared, "mail", shared), routes: []string{"ship", "mail"}},
		{ev: keyed("evt_bkm_c", "ship", batchOrderKey), routes: []string{"ship", "mail"}},
		{ev: missing, routes: []string{"ship", "mail"}},
		{ev: event("evt_plain"), routes: []string{"ship"}},
	}
	b.claimMany(t, reqs)
	for _, r := range reqs {
		require.NoError(t, r.err, r.ev.ID)
	}

	// One of evt_bkm_a and evt_bkm_b holds the shared ship key; the other is skipped.
	var holder string
	require.NoError(t, b.conn.QueryRow(t.Context(), `SELECT event_id FROM webhook_business_keys
WHERE route = 'ship' AND business_key = $1`, shared).Scan(&holder))
	require.Equal(t, 1, count(t, b.conn, `SELECT count(*) FROM webhook_business_keys
WHERE route = 'mail' AND business_key = $1 AND event_id = 'evt_bkm_a'`, shared), "the mail key is evt_bkm_a's alone")
	var jobs []claim.DeliveryArgs
	for _, r := range reqs[:2] {
		c, ds := b.get(t, r.ev.ID)
		if r.ev.ID == holder {
			require.Equal(t, claim.DeliveryProcessing, ds["ship"].Status)
			require.Nil(t, r.res.Skipped)
			continue
		}
		reason := "business key is held by stripe/" + holder
		require.Equal(t, []string{"ship"}, r.res.Skipped, r.ev.ID)
		require.Equal(t, claim.DeliverySkipped, ds["ship"].Status)
		require.Equal(t, reason, ds["ship"].LastError, "the in-batch holder is named")
		if r.ev.ID == "evt_bkm_b" {
			require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ship"}}, r.res)
			require.Equal(t, claim.Ignored, c.Status, "all skipped: settled as ignored")
			require.Equal(t, reason, c.LastError)
		} else {
			require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Skipped: []string{"ship"}}, r.res)
		}
	}
	jobs = append(jobs, args(holder, "ship")...)
	jobs = append(jobs, args("evt_bkm_a", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Skipped: []string{"ship"}}, reqs[2].res)
	_, ds := b.get(t, "evt_bkm_c")
	require.Equal(t, "business key is held by stripe/evt_bkm_old", ds["ship"].LastError, "the committed holder is named")
	jobs = append(jobs, args("evt_bkm_c", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1, Unkeyed: []string{"ship"}}, reqs[3].res)
	c, ds := b.get(t, "evt_bkm_missing")
	require.Equal(t, claim.DeliveryFailed, ds["ship"].Status)
	require.True(t, ds["ship"].BusinessKeyMissing)
	require.Equal(t, "business key: json:data.object.id is missing", c.LastError)
	jobs = append(jobs, args("evt_bkm_missing", "mail")...)

	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Processing, Deliveries: 1}, reqs[4].res)
	jobs = append(jobs, args("evt_plain", "ship")...)
	jobs = append(jobs, args("evt_bkm_old", "ship")...)
	b.requireJobs(t, jobs...)
}

// TestClaimManyLateHolders: a batch that waits on keys another transaction
// holds, and then commits, reads what its statement's snapshot could not:
// the body's hash is held (a replay), a business key's holder is named.
func TestClaimManyLateHolders(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := t.Context()
	const body = `{"late": "body"}`
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	holder := testfactory.Claim(ctx, t, tx, &testfactory.ClaimOpts{EventID: "evt_holder", Payload: []byte(body), BodyHash: true})
	testfactory.BusinessKey(ctx, t, tx, claim.Key{Provider: holder.Provider, EventID: holder.EventID, Route: "ship"}, orderKey)

	reqs := []*request{
		{ev: keyed("evt_late_keyed", "ship", orderKey), routes: []string{"ship"}},
		{ev: guarded("evt_late_replay", body), routes: []string{"ship"}},
	}
	var done sync.WaitGroup
	var batchErr error
	done.Go(func() { batchErr = b.tryClaimMany(reqs) })
	require.Eventually(t, func() bool {
		return count(t, b.conn, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	}, 10*time.Second, 5*time.Millisecond, "the batch waits on the uncommitted holder")
	require.NoError(t, tx.Commit(ctx))
	done.Wait()
	require.NoError(t, batchErr)

	require.NoError(t, reqs[0].err)
	require.Equal(t, claim.Result{Decision: claim.Claimed, Status: claim.Ignored, Skipped: []string{"ship"}}, reqs[0].res)
	c, ds := b.get(t, "evt_late_keyed")
	require.Equal(t, "business key is held by stripe/evt_holder", ds["ship"].LastError, "the late holder is named")
	require.Equal(t, "business key is held by stripe/evt_holder", c.LastError)
	require.NoError(t, reqs[1].err)
	require.Equal(t, claim.Result{Decision: claim.Replay}, reqs[1].res)
}

// TestClaimManyJobMetadata: events claimed in one shared batch each enqueue
// their jobs with their own metadata (the accepting request's trace
// context), as they would claiming alone.
func TestClaimManyJobMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reqs := []*request{{ev: event("evt_m1"), routes: []string{"ship", "mail"}}, {ev: event("evt_m2"), routes: []string{"ship"}}}
	for _, r := range reqs {
		r.ev.JobMetadata = []byte(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-` + map[string]string{"evt_m1": "00f067aa0ba902b7", "evt_m2": "00f067aa0ba902b8"}[r.ev.ID] + `-01"}`)
	}
	b.claimMany(t, reqs)
	metadata := map[string]string{}
	for _, r := range reqs {
		require.NoError(t, r.err)
		require.Equal(t, claim.Claimed, r.res.Decision)
		metadata[r.ev.ID] = string(r.ev.JobMetadata)
	}
	for _, job := range b.requireJobs(t, slices.Concat(args("evt_m1", "ship", "mail"), args("evt_m2", "ship"))...) {
		var a claim.DeliveryArgs
		require.NoError(t, json.Unmarshal(job.EncodedArgs, &a))
		var want, got map[string]any
		require.NoError(t, json.Unmarshal([]byte(metadata[a.EventID]), &want))
		require.NoError(t, json.Unmarshal(job.Metadata, &got))
		require.Subset(t, got, want, "job %d of %s carries its event's metadata", job.ID, a.EventID)
	}
}

// TestClaimUnstorable: an event holding text the tables cannot store fails
// with ErrUnstorable before any statement, alone (Claim) or in a batch
// (ClaimMany), naming the field and never quoting it.
func TestClaimUnstorable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poison := event("evt_poison")
	poison.ContentType = "\xff" // not UTF-8 (SQLSTATE 22021)
	_, err := testfactory.ClaimEvent(t.Context(), b.store, poison, []string{"ship"}, false)
	require.ErrorIs(t, err, claim.ErrUnstorable)
	require.ErrorContains(t, err, "the Content-Type is not UTF-8 text", "the field is named, not quoted")
	require.NotContains(t, err.Error(), "\xff")

	_, err = b.store.ClaimMany(t.Context(), []claim.Request{{Event: event("evt_fine"), Routes: []string{"ship"}}, {Event: poison}})
	require.ErrorIs(t, err, claim.ErrUnstorable)
	require.Zero(t, count(t, b.conn, `SELECT count(*) FROM webhook_event_claims`), "nothing is claimed")
}
