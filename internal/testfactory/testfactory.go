// Package testfactory puts claims, deliveries, attempts and River jobs into
// the states tests need, with defaults for what a test does not care about,
// and reads jobs through River's API (Jobs), so that tests of the house's
// behaviour hold no hand-written INSERT or UPDATE of its tables and no
// query of River's. Status and completed_at always agree, as the schema
// requires. Jobs a test expects inserted are asserted with River's own
// rivertest.RequireInserted* helpers (DeliveryJobs builds their
// expectation).
//
// What is left by design, each in its own test file: rows written into an
// older schema before a migration runs (internal/migrate, the upgrade test
// in internal/e2e), which this package, written for today's schema, cannot
// describe; seeds of tens of thousands of rows in one set-based statement
// (internal/bench, TestExportAtScale, the console's count bound), where a
// statement a row would take minutes; scratch tables of tests that are not
// about hookgate's data (internal/pgcluster, cmd/internal/cli); and the
// tests of the River seam itself (internal/claim's riverseam, endjobs,
// plan and worker-session tests), which corrupt, lock or plan River's rows
// on purpose, or read what River's helpers do not expose; tests that check
// River's tables exist or carry their storage parameters (dbtest, migrate,
// e2e's migrate test); and a fault injected into Postgres' own catalog
// (migrate's console test). Not yet moved: some other tests of
// internal/claim (search, retention, attempts, claimmany, export, queue),
// which set columns this package has no option for (a body hash, a
// business key, terminal_at changed afterwards) or count jobs, and the
// console browser test's open circuit (a route_breakers row).
package testfactory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivertype"

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
	// LastError is the claim's roll-up of its deliveries' last error
	// (SetClaim only).
	LastError   string
	Payload     []byte // default `{}`
	FirstSeenAt *When  // default now
	UpdatedAt   *When  // default now
	// TerminalAt is when a terminal claim became so, the time retention
	// ages it from (Claim only); nil leaves it to the database: now for a
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
}

// Claim inserts a claim and its opts.Deliveries, without jobs, and returns
// its key.
func Claim(ctx context.Context, tb testing.TB, exec Executor, opts *ClaimOpts) claim.EventKey {
	tb.Helper()
	if opts == nil {
		opts = &ClaimOpts{}
	}
	k := claim.EventKey{Provider: cmp.Or(opts.Provider, "stripe"), EventID: cmp.Or(opts.EventID, "evt_"+randomHex())}
	status := cmp.Or(opts.Status, claim.Processing)
	payload := opts.Payload
	if payload == nil {
		payload = []byte(`{}`)
	}
	var terminalAgo *float64
	if opts.TerminalAt != nil {
		s := opts.TerminalAt.seconds()
		terminalAgo = &s
	}
	_, err := exec.Exec(ctx, `INSERT INTO webhook_event_claims
    (provider, event_id, event_type, status, payload, content_type, first_seen_at, updated_at, completed_at, terminal_at)
VALUES ($1, $2, $3, $4, $5, 'application/json', now() - make_interval(secs => $6), now() - make_interval(secs => $7),
        CASE WHEN $4 = 'completed' THEN now() END, now() - make_interval(secs => $8::float8))`,
		k.Provider, k.EventID, cmp.Or(opts.EventType, "invoice.paid"), string(status), payload,
		opts.FirstSeenAt.seconds(), opts.UpdatedAt.seconds(), terminalAgo)
	if err != nil {
		tb.Fatalf("testfactory: inserting claim %s: %v", k, err)
	}
	for route, d := range opts.Deliveries {
		if d == nil {
			d = &DeliveryOpts{}
		}
		_, err := exec.Exec(ctx, `INSERT INTO webhook_deliveries
    (provider, event_id, route, status, last_error, updated_at, completed_at)
VALUES ($1, $2, $3, $4, nullif($5, ''), now() - make_interval(secs => $6), CASE WHEN $4 = 'completed' THEN now() END)`,
			k.Provider, k.EventID, route, string(cmp.Or(d.Status, claim.DeliveryProcessing)), d.LastError, d.UpdatedAt.seconds())
		if err != nil {
			tb.Fatalf("testfactory: inserting delivery %s/%s: %v", k, route, err)
		}
	}
	return k
}

// SetClaim changes the fields of claim k that opts sets. Identity fields
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
	if opts.ClearPayload {
		u.set("payload = NULL")
	}
	u.run(ctx, tb, exec, "webhook_event_claims", "provider = %s AND event_id = %s", k.Provider, k.EventID)
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

// JobWhere picks River jobs; zero fields match every job.
type JobWhere struct {
	ID int64
	// Kind picks the jobs of one kind (Jobs only; a Delivery implies
	// claim.DeliveryKind).
	Kind string
	// Delivery picks the delivery jobs of one delivery; Route "" picks
	// those of every delivery of the claim.
	Delivery claim.Key
	State    rivertype.JobState
}

// JobOpts is what SetJobs changes; zero fields are left as they are.
type JobOpts struct {
	State       rivertype.JobState
	Queue       string
	Attempt     int
	AttemptedAt *When
	FinalizedAt *When
	ScheduledAt *When
}

// SetJobs changes the River jobs where picks, as River itself would (a
// rescuer, a completer, an operator), and returns their ids in id order.
func SetJobs(ctx context.Context, tb testing.TB, exec Executor, where JobWhere, opts *JobOpts) []int64 {
	tb.Helper()
	var u update
	if opts.State != "" {
		u.set("state = %s", string(opts.State))
	}
	if opts.Queue != "" {
		u.set("queue = %s", opts.Queue)
	}
	if opts.Attempt != 0 {
		u.set("attempt = %s", opts.Attempt)
	}
	u.setTime("attempted_at", opts.AttemptedAt)
	u.setTime("finalized_at", opts.FinalizedAt)
	u.setTime("scheduled_at", opts.ScheduledAt)
	return u.jobs(ctx, tb, exec, "UPDATE river_job SET "+strings.Join(u.sets, ", "), where)
}

// DeleteJobs deletes the River jobs where picks, as if River's retention
// or an operator had, and returns their ids in id order.
func DeleteJobs(ctx context.Context, tb testing.TB, exec Executor, where JobWhere) []int64 {
	tb.Helper()
	var u update
	return u.jobs(ctx, tb, exec, "DELETE FROM river_job", where)
}

// update builds one UPDATE statement with numbered arguments.
type update struct {
	sets []string
	args []any
}

// arg adds v and returns its placeholder.
func (u *update) arg(v any) string {
	u.args = append(u.args, v)
	return fmt.Sprintf("$%d", len(u.args))
}

// set adds one assignment; each %s in format is a placeholder for the next
// of vs.
func (u *update) set(format string, vs ...any) { u.sets = append(u.sets, u.fill(format, vs...)) }

func (u *update) setTime(column string, w *When) {
	if w != nil {
		u.set(column+" = now() - make_interval(secs => %s)", w.seconds())
	}
}

func (u *update) fill(format string, vs ...any) string {
	ph := make([]any, len(vs))
	for i, v := range vs {
		ph[i] = u.arg(v)
	}
	return fmt.Sprintf(format, ph...)
}

func (u *update) run(ctx context.Context, tb testing.TB, exec Executor, table, where string, vs ...any) {
	tb.Helper()
	if len(u.sets) == 0 {
		tb.Fatalf("testfactory: nothing to change in %s", table)
	}
	sql := "UPDATE " + table + " SET " + strings.Join(u.sets, ", ") + " WHERE " + u.fill(where, vs...)
	tag, err := exec.Exec(ctx, sql, u.args...)
	if err != nil {
		tb.Fatalf("testfactory: updating %s: %v", table, err)
	}
	if tag.RowsAffected() == 0 {
		tb.Fatalf("testfactory: no row of %s matched %v", table, vs)
	}
}

func (u *update) jobs(ctx context.Context, tb testing.TB, exec Executor, statement string, where JobWhere) []int64 {
	tb.Helper()
	if strings.HasPrefix(statement, "UPDATE") && len(u.sets) == 0 {
		tb.Fatalf("testfactory: nothing to change in river_job")
	}
	k := where.Delivery
	sql := statement + " WHERE " + u.fill(`(%s = 0 OR id = %s)
  AND (%s = '' OR (kind = %s AND args->>'provider' = %s AND args->>'event_id' = %s AND (%s = '' OR args->>'route' = %s)))
  AND (%s = '' OR state::text = %s)
RETURNING id`, where.ID, where.ID, k.EventID, claim.DeliveryKind, k.Provider, k.EventID, k.Route, k.Route,
		string(where.State), string(where.State))
	rows, err := exec.Query(ctx, "WITH j AS ("+sql+") SELECT id FROM j ORDER BY id", u.args...)
	if err == nil {
		var ids []int64
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err == nil && len(ids) == 0 {
			tb.Fatalf("testfactory: no River job matched %+v", where)
		}
		if err == nil {
			return ids
		}
	}
	tb.Fatalf("testfactory: changing River jobs: %v", err)
	return nil
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// When is a time for the factory's time fields, relative to the database's
// clock: now() there is the start of the transaction, which a test in a
// rolled-back transaction never leaves.
type When struct{ ago time.Duration }

// Ago is d before now.
func Ago(d time.Duration) *When { return &When{ago: d} }

// In is d after now.
func In(d time.Duration) *When { return &When{ago: -d} }

// Now is now.
func Now() *When { return &When{} }

// seconds is how many seconds before now w is; 0 (now) for nil.
func (w *When) seconds() float64 {
	if w == nil {
		return 0
	}
	return w.ago.Seconds()
}

// ExpireLeader ends the River leadership of a client that is gone, as the
// expiry of its term would some 15 seconds later, so that the next client
// to start is elected at once and runs the maintenance services (the
// rescuer among them) without that wait.
func ExpireLeader(ctx context.Context, tb testing.TB, exec Executor) {
	tb.Helper()
	if _, err := exec.Exec(ctx, `DELETE FROM river_leader`); err != nil {
		tb.Fatalf("testfactory: expiring the River leader: %v", err)
	}
}

// ClaimEvent claims ev for routes through store as ingest does, a batch of
// one: ClaimMany, then Resolve for what it leaves to a single event (with
// reopen, a failed claim's redelivery reopens it).
func ClaimEvent(ctx context.Context, store *claim.Store, ev claim.Event, routes []string, reopen bool) (claim.Result, error) {
	return store.Claim(ctx, ev, routes, reopen)
}
