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
	Attempts(ctx, tb, exec, []claim.Key{k}, opts)
}

// Attempts adds a row to the attempt history of each delivery of keys, as
// Attempt does, in one statement: for tests that need thousands.
func Attempts(ctx context.Context, tb testing.TB, exec Executor, keys []claim.Key, opts *AttemptOpts) {
	tb.Helper()
	if opts == nil {
		opts = &AttemptOpts{}
	}
	var providers, eventIDs, routes []string
	for _, k := range keys {
		providers, eventIDs, routes = append(providers, k.Provider), append(eventIDs, k.EventID), append(routes, k.Route)
	}
	_, err := exec.Exec(ctx, `INSERT INTO webhook_attempts
    (provider, event_id, route, attempt, started_at, duration_ms, status_code, error, response, request, response_headers, run_attempt, run_max)
SELECT provider, event_id, route, $4::int, now(), 17, $5::int, nullif($6::text, ''), $7::text, nullif($8::text, '')::jsonb,
       nullif($9::text, '')::jsonb, nullif($10::int, 0), nullif($11::int, 0)
FROM unnest($1::text[], $2::text[], $3::text[]) AS d (provider, event_id, route)`,
		providers, eventIDs, routes, cmp.Or(opts.Attempt, 1), opts.StatusCode, opts.Error, opts.Response,
		opts.Request, opts.ResponseHeaders, opts.RunAttempt, opts.RunMax)
	if err != nil {
		tb.Fatalf("testfactory: inserting attempt %d of %d deliveries: %v", cmp.Or(opts.Attempt, 1), len(keys), err)
	}
}
