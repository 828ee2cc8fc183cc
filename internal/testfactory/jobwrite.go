package testfactory

import (
	"context"
	"strings"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/hookgate/hookgate/internal/claim"
)

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
