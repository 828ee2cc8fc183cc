package testfactory

import (
	"cmp"
	"context"
	"testing"

	"github.com/hookgate/hookgate/internal/claim"
)

// AttemptOpts describes one row of a delivery's attempt history, as the
// worker records it; zero fields take the defaults given.
type AttemptOpts struct {
	Attempt    int  // Hookgate-Attempt's number; default 1
	StatusCode *int // nil: no answer came
	Error      string
	// Response is the answer's body as stored, "" included.
	Response string
	// Request and ResponseHeaders are JSON as the worker stores them;
	// "" for none.
	Request, ResponseHeaders string
	// RunAttempt and RunMax are River's attempt and max_attempts of the
	// run that made the call; 0 for none.
	RunAttempt, RunMax int
}

// Attempt adds a row of delivery k's attempt history, started now and
// lasting 17 ms.
func Attempt(ctx context.Context, tb testing.TB, exec Executor, k claim.Key, opts *AttemptOpts) {
	tb.Helper()
	if opts == nil {
		opts = &AttemptOpts{}
	}
	_, err := exec.Exec(ctx, `INSERT INTO webhook_attempts
    (provider, event_id, route, attempt, started_at, duration_ms, status_code, error, response, request, response_headers, run_attempt, run_max)
VALUES ($1, $2, $3, $4, now(), 17, $5, nullif($6, ''), $7, nullif($8, '')::jsonb, nullif($9, '')::jsonb, nullif($10, 0), nullif($11, 0))`,
		k.Provider, k.EventID, k.Route, cmp.Or(opts.Attempt, 1), opts.StatusCode, opts.Error, opts.Response,
		opts.Request, opts.ResponseHeaders, opts.RunAttempt, opts.RunMax)
	if err != nil {
		tb.Fatalf("testfactory: inserting attempt %d of %s: %v", cmp.Or(opts.Attempt, 1), k, err)
	}
}
