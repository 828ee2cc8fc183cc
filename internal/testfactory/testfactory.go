// Package testfactory puts claims, deliveries, business keys, attempts,
// audit rows, open circuits and River jobs into the states tests need,
// with defaults for what a test does not care about, and reads jobs
// through River's API (Jobs), so that tests of the house's behaviour hold
// no hand-written INSERT or UPDATE of its tables and no query of River's.
// Status and completed_at always agree, as the schema requires. Claims and
// Attempts write thousands of rows in one statement each, for tests that
// need a large table. Jobs a test expects inserted are asserted with
// River's own rivertest.RequireInserted* helpers (DeliveryJobs builds
// their expectation).
//
// What is left by design, 31 statements in 10 test files (grep INSERT INTO
// and UPDATE of webhook_, route_, audit_log and console_ tables in tests
// outside internal/bench): rows written into an older schema before a
// migration runs (internal/migrate's history cascade and terminal_at
// tests, the upgrade test in internal/e2e), which this package, written
// for today's schema, cannot describe; the plan tests inside package claim
// (plan, search), which seed 30,000 rows for the planner and, being
// inside the package this one imports, cannot use it; scratch tables of
// tests that are not about hookgate's data (internal/pgcluster,
// cmd/internal/cli); the tests of the River seam itself (internal/claim's
// riverseam, endjobs, plan and worker-session tests), which corrupt, lock
// or plan River's rows on purpose, or read what River's helpers do not
// expose; and retention's check that the database refuses a terminal claim
// without its terminal_at, a state this package never writes. Also left:
// tests that check River's tables exist or carry their storage parameters
// (dbtest, migrate, e2e's migrate test), a fault injected into Postgres'
// own catalog (migrate's console test), and internal/bench, whose seeds
// are the benchmarks' own.
package testfactory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookgate/hookgate/internal/claim"
)

// Executor runs statements: a pool, a connection or a transaction.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ClaimOpts describes a claim. For Claim, zero fields take the defaults
// given; for SetClaim, zero fields are left as they are.
type ClaimOpts struct {
	Provider  string // default "stripe"
	EventID   string // default "evt_" and random hex
	EventType string // default "invoice.paid"
	// Status defaults to processing; completed sets completed_at, any other
	// status clears it.
	Status claim.Status
	// LastError is the claim's roll-up of its deliveries' last error.
	LastError string
	Payload   []byte // default `{}`
	// BodyHash stores the payload's SHA-256 as the claim's body hash, as
	// a claim guarded against replays of its body has (Claim only).
	BodyHash bool
	// FirstSeenAt defaults to now. It is also the created_at of the
	// claim's deliveries, as the claim statement makes them with the
	// claim: SetClaim moves theirs with it.
	FirstSeenAt *When
	UpdatedAt   *When // default now
	// TerminalAt is when a terminal claim became so, the time retention
	// ages it from; for Claim, nil leaves it to the database: now for a
	// terminal status, none while processing.
	TerminalAt *When
	// ClearPayload clears the payload, as retention does (SetClaim only).
	ClearPayload bool
	// Deliveries, by route, are inserted with the claim (Claim only).
	Deliveries map[string]*DeliveryOpts
}

// DeliveryOpts describes a delivery. For Claim, zero fields take the
// defaults given; for SetDelivery, zero fields are left as they are.
type DeliveryOpts struct {
	// Status defaults to processing; completed sets completed_at, any other
	// status clears it.
	Status    claim.DeliveryStatus
	LastError string
	UpdatedAt *When // default now
	// BusinessKeyMissing marks a delivery failed for want of its business
	// key (Claim only).
	BusinessKeyMissing bool
}

// Claim inserts a claim and its opts.Deliveries, without jobs, and returns
// its key.
func Claim(ctx context.Context, tb testing.TB, exec Executor, opts *ClaimOpts) claim.EventKey {
	tb.Helper()
	return Claims(ctx, tb, exec, []*ClaimOpts{opts})[0]
}

// Claims inserts claims, each as Claim does, in one statement for the
// claims and one for their deliveries, and returns their keys in order:
// for tests that need thousands.
func Claims(ctx context.Context, tb testing.TB, exec Executor, opts []*ClaimOpts) []claim.EventKey {
	tb.Helper()
	var c struct {
		provider, eventID, eventType, status, lastError []string
		payload                                         [][]byte
		bodyHash                                        []bool
		first, updated, terminal                        times
	}
	var d struct {
		provider, eventID, route, status, lastError []string
		updated                                     times
		keyMissing                                  []bool
	}
	keys := make([]claim.EventKey, len(opts))
	for i, o := range opts {
		if o == nil {
			o = &ClaimOpts{}
		}
		k := claim.EventKey{Provider: cmp.Or(o.Provider, "stripe"), EventID: cmp.Or(o.EventID, "evt_"+randomHex())}
		keys[i] = k
		payload := o.Payload
		if payload == nil {
			payload = []byte(`{}`)
		}
		c.provider, c.eventID = append(c.provider, k.Provider), append(c.eventID, k.EventID)
		c.eventType = append(c.eventType, cmp.Or(o.EventType, "invoice.paid"))
		c.status = append(c.status, string(cmp.Or(o.Status, claim.Processing)))
		c.lastError = append(c.lastError, o.LastError)
		c.payload, c.bodyHash = append(c.payload, payload), append(c.bodyHash, o.BodyHash)
		c.first.add(o.FirstSeenAt, true)
		c.updated.add(o.UpdatedAt, true)
		c.terminal.add(o.TerminalAt, false)
		for _, route := range slices.Sorted(maps.Keys(o.Deliveries)) {
			do := o.Deliveries[route]
			if do == nil {
				do = &DeliveryOpts{}
			}
			d.provider, d.eventID, d.route = append(d.provider, k.Provider), append(d.eventID, k.EventID), append(d.route, route)
			d.status = append(d.status, string(cmp.Or(do.Status, claim.DeliveryProcessing)))
			d.lastError, d.keyMissing = append(d.lastError, do.LastError), append(d.keyMissing, do.BusinessKeyMissing)
			d.updated.add(do.UpdatedAt, true)
		}
	}
	_, err := exec.Exec(ctx, `INSERT INTO webhook_event_claims
    (provider, event_id, event_type, status, last_error, payload, body_hash, content_type, first_seen_at, updated_at, completed_at, terminal_at)
SELECT provider, event_id, event_type, status, nullif(last_error, ''), payload, CASE WHEN body_hash THEN sha256(payload) END,
       'application/json', coalesce(first_at, now() - make_interval(secs => first_ago)),
       coalesce(updated_at, now() - make_interval(secs => updated_ago)),
       CASE WHEN status = 'completed' THEN now() END, coalesce(terminal_at, now() - make_interval(secs => terminal_ago))
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bool[],
            $8::timestamptz[], $9::float8[], $10::timestamptz[], $11::float8[], $12::timestamptz[], $13::float8[])
  AS c (provider, event_id, event_type, status, last_error, payload, body_hash, first_at, first_ago, updated_at, updated_ago,
        terminal_at, terminal_ago)`,
		c.provider, c.eventID, c.eventType, c.status, c.lastError, c.payload, c.bodyHash,
		c.first.at, c.first.ago, c.updated.at, c.updated.ago, c.terminal.at, c.terminal.ago)
	if err != nil {
		tb.Fatalf("testfactory: inserting %d claims: %v", len(keys), err)
	}
	if len(d.route) == 0 {
		return keys
	}
	_, err = exec.Exec(ctx, `INSERT INTO webhook_deliveries
    (provider, event_id, route, status, last_error, business_key_missing, created_at, updated_at, completed_at)
SELECT d.provider, d.event_id, d.route, d.status, nullif(d.last_error, ''), d.key_missing, c.first_seen_at,
       coalesce(d.updated_at, now() - make_interval(secs => d.updated_ago)), CASE WHEN d.status = 'completed' THEN now() END
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::timestamptz[], $8::float8[])
  AS d (provider, event_id, route, status, last_error, key_missing, updated_at, updated_ago)
JOIN webhook_event_claims c ON c.provider = d.provider AND c.event_id = d.event_id`,
		d.provider, d.eventID, d.route, d.status, d.lastError, d.keyMissing, d.updated.at, d.updated.ago)
	if err != nil {
		tb.Fatalf("testfactory: inserting the deliveries of %d claims: %v", len(keys), err)
	}
	return keys
}

// BusinessKey makes delivery k the holder of its route's business key
// (JSON, as ingest extracts it), as a claim that took the key does.
func BusinessKey(ctx context.Context, tb testing.TB, exec Executor, k claim.Key, businessKey string) {
	tb.Helper()
	_, err := exec.Exec(ctx, `INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
VALUES ($1, sha256(convert_to($2, 'UTF8')), $2, $3, $4)`, k.Route, businessKey, k.Provider, k.EventID)
	if err != nil {
		tb.Fatalf("testfactory: inserting the business key of %s: %v", k, err)
	}
}

// SetClaim changes the fields of claim k that opts sets; a FirstSeenAt
// moves the created_at of the claim's deliveries with it. Identity fields
// and Deliveries are ignored.
func SetClaim(ctx context.Context, tb testing.TB, exec Executor, k claim.EventKey, opts *ClaimOpts) {
	tb.Helper()
	var u update
	if opts.Status != "" {
		u.set("status = %s", string(opts.Status))
		u.set("completed_at = CASE WHEN %s = 'completed' THEN coalesce(completed_at, now()) END", string(opts.Status))
	}
	if opts.LastError != "" {
		u.set("last_error = %s", opts.LastError)
	}
	u.setTime("first_seen_at", opts.FirstSeenAt)
	u.setTime("updated_at", opts.UpdatedAt)
	u.setTime("terminal_at", opts.TerminalAt)
	if opts.ClearPayload {
		u.set("payload = NULL")
	}
	u.run(ctx, tb, exec, "webhook_event_claims", "provider = %s AND event_id = %s", k.Provider, k.EventID)
	if opts.FirstSeenAt != nil {
		if _, err := exec.Exec(ctx, `UPDATE webhook_deliveries d SET created_at = c.first_seen_at FROM webhook_event_claims c
WHERE c.provider = $1 AND c.event_id = $2 AND d.provider = c.provider AND d.event_id = c.event_id`, k.Provider, k.EventID); err != nil {
			tb.Fatalf("testfactory: moving the deliveries of claim %s: %v", k, err)
		}
	}
}

// SetDelivery changes the fields of delivery k that opts sets; k.Route ""
// means every delivery of the claim.
func SetDelivery(ctx context.Context, tb testing.TB, exec Executor, k claim.Key, opts *DeliveryOpts) {
	tb.Helper()
	var u update
	if opts.Status != "" {
		u.set("status = %s", string(opts.Status))
		u.set("completed_at = CASE WHEN %s = 'completed' THEN coalesce(completed_at, now()) END", string(opts.Status))
	}
	if opts.LastError != "" {
		u.set("last_error = %s", opts.LastError)
	}
	u.setTime("updated_at", opts.UpdatedAt)
	u.run(ctx, tb, exec, "webhook_deliveries", "provider = %s AND event_id = %s AND (%s = '' OR route = %s)",
		k.Provider, k.EventID, k.Route, k.Route)
}

// DeleteClaim deletes claim k with what hangs off it (its deliveries and
// business keys), as retention does; its jobs are left.
func DeleteClaim(ctx context.Context, tb testing.TB, exec Executor, k claim.EventKey) {
	tb.Helper()
	tag, err := exec.Exec(ctx, `DELETE FROM webhook_event_claims WHERE provider = $1 AND event_id = $2`, k.Provider, k.EventID)
	if err != nil {
		tb.Fatalf("testfactory: deleting claim %s: %v", k, err)
	}
	if tag.RowsAffected() == 0 {
		tb.Fatalf("testfactory: no claim %s to delete", k)
	}
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ClaimEvent claims ev for routes through store as ingest does, a batch of
// one: ClaimMany, then Resolve for what it leaves to a single event (with
// reopen, a failed claim's redelivery reopens it).
func ClaimEvent(ctx context.Context, store *claim.Store, ev claim.Event, routes []string, reopen bool) (claim.Result, error) {
	return store.Claim(ctx, ev, routes, reopen)
}
