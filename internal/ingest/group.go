package ingest

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/internal/batch"
	"github.com/hookgate/hookgate/internal/claim"
)

// DefaultGroupConcurrency is two claim transactions at once: one executes
// while the other's commit is flushed. More only split the waiting
// requests into smaller batches, each paying a transaction's round trips
// and commit: four at once cost Postgres more CPU per event than two, on a
// fast disk and on a slow one alike (docs/benchmarks-history.md, "Claim
// transactions at once").
const DefaultGroupConcurrency = 2

// groupMax caps how many claims share one transaction. Each carries its
// payload (up to ingest.max_body_bytes), which the statement copies once
// more while it is sent.
const groupMax = 64

// GroupOptions configure a Group.
type GroupOptions struct {
	// Timeout bounds each claim transaction, retries of a refused batch
	// included: ingest.claim_timeout. Zero means batch.DefaultTimeout.
	Timeout time.Duration
	// Concurrency is how many claim transactions run at once: while one
	// waits for its commit to reach the disk, the next executes. Their
	// claims go in key order, so two batches sharing keys wait for each
	// other rather than deadlock. Zero means DefaultGroupConcurrency.
	Concurrency int
	// Observe, if set, is told each batch's size.
	Observe func(n int)
}

// Group claims events with group commit: requests that arrive while a
// claim transaction runs share the next one (see batch.Combiner), so that
// sixty-four concurrent requests cost one commit rather than sixty-four. A
// lone request runs at once; nothing waits on a timer.
//
// The promises of claim.Store.ClaimMany and Resolve hold for each event: its result is returned
// only after the commit that holds its claim, deliveries and jobs; copies
// of one key in one batch resolve to one claim and duplicates. A batch that
// the database refuses is split until the event at fault is alone, so that
// only its request fails; a batch that loses its connection or times out
// fails all its requests at once. An event holding text the tables cannot
// store (claim.ErrUnstorable) is failed before the statement, at no cost to
// the others.
//
// A batch is one claim.Store.ClaimMany. What it leaves to a single event
// runs alone through claim.Store.Resolve: a duplicate that may reopen a
// failed claim, and a duplicate whose claim retention deleted while the
// batch read it (claimed anew).
type Group struct {
	store Batcher
	batch batch.Combiner[claim.Request, claim.Result]
}

// Batcher is what a Group claims through: the claim statement for a
// batch, and what a batch leaves to one event. *claim.Store is one.
type Batcher interface {
	ClaimMany(ctx context.Context, reqs []claim.Request) ([]claim.Result, error)
	Resolve(ctx context.Context, req claim.Request, reopen bool, res claim.Result) (claim.Result, error)
}

// NewGroup returns a group over s.
func NewGroup(s Batcher, o GroupOptions) *Group {
	g := &Group{store: s}
	g.batch = batch.Combiner[claim.Request, claim.Result]{Max: groupMax, Concurrency: cmp.Or(o.Concurrency, DefaultGroupConcurrency),
		Timeout: o.Timeout, Run: g.run, Isolate: batch.Refused, Observe: o.Observe}
	return g
}

// run claims a batch (claim.Store.ClaimMany). An event the tables cannot
// hold is failed before any statement: the others run again at once as a
// batch, so it costs them no round trip, where a statement the database
// refused would be split and rerun.
func (g *Group) run(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	faults := batch.Faults{}
	for i, r := range reqs {
		if err := claim.Storable(r.Event, r.Routes); err != nil {
			faults[i] = err
		}
	}
	if len(faults) > 0 {
		return nil, faults
	}
	return g.store.ClaimMany(ctx, reqs)
}

// Claim records ev and fans it out to routes (the names of the routes its
// type matches), with group commit: ClaimMany for its batch, then Resolve
// for what that leaves to the one event. In one transaction: the claim
// row, one delivery row and one job per route. A route whose business key
// (ev.BusinessKeys) is held by another claim gets a skipped delivery and
// no job; one whose key is missing gets a failed delivery and no job. Only
// the call that inserts the claim does this; any other call for the same
// key is a Duplicate, except that with reopen a failed claim has its
// failed deliveries reopened (see claim.Store.Reopen); a duplicate whose
// claim retention deleted while it was read is claimed anew. It returns as
// soon as ctx ends, with an error; the claim may still commit with its
// batch, which a retry then finds as a duplicate.
func (g *Group) Claim(ctx context.Context, ev claim.Event, routes []string, reopen bool) (claim.Result, error) {
	req := claim.Request{Event: ev, Routes: routes}
	res, err := g.batch.Do(ctx, req)
	if err != nil {
		return claim.Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	return g.store.Resolve(ctx, req, reopen, res)
}

// Waiting returns how many events wait for a claim transaction to take them.
func (g *Group) Waiting() int { return g.batch.Waiting() }
