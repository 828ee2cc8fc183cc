package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AttemptRecord is one row of a delivery's attempt history.
type AttemptRecord struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	// StatusCode is the downstream's HTTP status; nil when none came.
	StatusCode *int `json:"status_code,omitempty"`
	// Error says why the attempt did not count as delivered; nil on success.
	Error *string `json:"error,omitempty"`
	// Response is the first 2 KiB of the answer's body, redacted; nil when
	// none came or retention cleared it. Only operators are shown it.
	Response *string `json:"response,omitempty"`
	// Request is what the attempt sent, and ResponseHeaders the answer's
	// headers, both redacted and bounded; nil when not recorded or cleared
	// by retention. Only operators are shown them, as Response.
	Request         *SentRequest        `json:"request,omitempty"`
	ResponseHeaders map[string][]string `json:"response_headers,omitempty"`
	// RunAttempt and RunMax place the attempt in its run of attempts (its
	// job's attempt and max_attempts); nil for rows from before they were
	// recorded.
	RunAttempt *int `json:"run_attempt,omitempty"`
	RunMax     *int `json:"run_max,omitempty"`
}

// SentRequest is a downstream request as the attempt history keeps it: the
// values of secret headers (the route's secret_headers, Authorization,
// the signature) shown as [redacted].
type SentRequest struct {
	Method  string              `json:"method"`
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	// Body is the first 2 KiB of the body sent (after the route's body
	// program), redacted like the headers; absent from attempts recorded
	// before it was kept.
	Body *string `json:"body,omitempty"`
}

// MaxHistoryHeaderBytes bounds the headers of a request or an answer kept
// in the attempt history (names and values together).
const MaxHistoryHeaderBytes = 8 << 10

// callColumns are the history columns of a batch of attempts, one entry
// per attempt, as recordAttemptsSQL takes them ($11 to $19): NULL where the
// attempt made no call. The error of a history row is its attempt's.
type callColumns struct {
	nums, durations []*int32
	starts          []*time.Time
	statuses        []*int32
	responses       []*string
	// requests and responseHeaders are JSON text.
	requests, responseHeaders []*string
	runAttempts, runMaxes     []*int32
}

func newCallColumns(n int) callColumns {
	return callColumns{nums: make([]*int32, n), durations: make([]*int32, n), starts: make([]*time.Time, n),
		statuses: make([]*int32, n), responses: make([]*string, n), requests: make([]*string, n),
		responseHeaders: make([]*string, n), runAttempts: make([]*int32, n), runMaxes: make([]*int32, n)}
}

// jsonText is v as JSON text, nil for a nil v. Values are strings, maps
// and slices of them, which always marshal.
func jsonText[T any](v *T) *string {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// positive is n as a column value, NULL when it is not above 0.
func positive(n int) *int32 {
	if n <= 0 {
		return nil
	}
	v := int32(min(n, 1<<31-1))
	return &v
}

// set fills entry i from c; a nil c (no call) leaves it NULL.
func (cc callColumns) set(i int, c *Call) {
	if c == nil {
		return
	}
	num, dur, start := int32(c.Attempt), int32(min(c.Duration.Milliseconds(), 1<<31-1)), c.StartedAt
	cc.nums[i], cc.durations[i], cc.starts[i] = &num, &dur, &start
	if c.Status != 0 {
		s := int32(c.Status)
		cc.statuses[i] = &s
	}
	cc.responses[i] = c.Response
	cc.requests[i] = jsonText(c.Request)
	if c.ResponseHeaders != nil {
		cc.responseHeaders[i] = jsonText(&c.ResponseHeaders)
	}
	cc.runAttempts[i], cc.runMaxes[i] = positive(c.RunAttempt), positive(c.RunMax)
}

// attemptsSQL reads the attempt history of one claim's deliveries, in
// order of route and attempt; full says whether with what only operators
// see (response, request, response_headers), else those are NULL and never
// read from the row.
func attemptsSQL(full bool) string {
	cols := "response, request, response_headers"
	if !full {
		cols = "NULL::text, NULL::jsonb, NULL::jsonb"
	}
	return `
SELECT route, attempt, started_at, duration_ms, status_code, error, ` + cols + `, run_attempt, run_max
FROM webhook_attempts
WHERE provider = $1 AND event_id = $2
ORDER BY route, attempt, started_at`
}

// Attempts returns the attempt history of the claim (provider, eventID),
// by route, each in order of attempt. full says whether responses, requests
// and response headers are read; without it they are all nil.
func (s *Store) Attempts(ctx context.Context, provider, eventID string, full bool) (map[string][]AttemptRecord, error) {
	rows, err := s.db.Query(ctx, attemptsSQL(full), provider, eventID)
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of %s/%s: %w", provider, eventID, err)
	}
	out := map[string][]AttemptRecord{}
	var route string
	var a AttemptRecord
	_, err = pgx.ForEachRow(rows, []any{&route, &a.Attempt, &a.StartedAt, &a.DurationMS, &a.StatusCode, &a.Error,
		&a.Response, &a.Request, &a.ResponseHeaders, &a.RunAttempt, &a.RunMax}, func() error {
		out[route] = append(out[route], a)
		a = AttemptRecord{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of %s/%s: %w", provider, eventID, err)
	}
	return out, nil
}
