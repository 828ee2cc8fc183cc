package testfactory

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
)

// DeliveryJobs is what River's rivertest.RequireManyInserted (or its Tx
// form) expects of n delivery jobs, each held to opts (nil for none): the
// jobs' kinds and count, which is how tests assert the jobs a claim, a
// release or a reopen inserted.
func DeliveryJobs(n int, opts *rivertest.RequireInsertedOpts) []rivertest.ExpectedJob {
	expected := make([]rivertest.ExpectedJob, n)
	for i := range expected {
		expected[i] = rivertest.ExpectedJob{Args: &claim.DeliveryArgs{}, Opts: opts}
	}
	return expected
}

// Beginner begins a transaction: a pool, a connection, or a transaction
// (a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Jobs lists the River jobs where picks, in id order, through River's
// public API (Client.JobListTx, in a transaction of db's rolled back
// afterwards), so that tests read jobs' states, attempts, queues and
// metadata without querying River's tables; rivertest's RequireInserted
// helpers say what was inserted, but not these. At most 10,000. A failure
// fails the test; ListJobs returns it instead.
func Jobs(ctx context.Context, tb testing.TB, db Beginner, where JobWhere) []*rivertype.JobRow {
	tb.Helper()
	jobs, err := ListJobs(ctx, db, where)
	if err != nil {
		tb.Fatalf("testfactory: %v", err)
	}
	return jobs
}

// ListJobs is Jobs for where a test may not fail: a handler's goroutine, or
// a poll that waits out a failover.
func ListJobs(ctx context.Context, db Beginner, where JobWhere) ([]*rivertype.JobRow, error) {
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("a River client to list jobs: %w", err)
	}
	params := river.NewJobListParams().First(10_000)
	k := where.Delivery
	switch {
	case k.EventID != "":
		params = params.Kinds(claim.DeliveryKind)
	case where.Kind != "":
		params = params.Kinds(where.Kind)
	}
	if where.ID != 0 {
		params = params.IDs(where.ID)
	}
	if where.State != "" {
		params = params.States(where.State)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing River jobs: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := client.JobListTx(ctx, tx, params)
	if err != nil {
		return nil, fmt.Errorf("listing River jobs: %w", err)
	}
	var jobs []*rivertype.JobRow
	for _, j := range res.Jobs {
		if k.EventID != "" {
			var a claim.DeliveryArgs
			if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
				return nil, fmt.Errorf("job %d's args: %w", j.ID, err)
			}
			if a.Provider != k.Provider || a.EventID != k.EventID || (k.Route != "" && a.Route != k.Route) {
				continue
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
