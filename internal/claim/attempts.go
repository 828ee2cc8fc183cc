package claim

import (
	"context"
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
}

// callColumns are the history columns of a batch of attempts, one entry
// per attempt, as recordAttemptsSQL takes them ($11 to $15): NULL where the
// attempt made no call. The error of a history row is its attempt's.
type callColumns struct {
	nums, durations []*int32
	starts          []*time.Time
	statuses        []*int32
	responses       []*string
}

func newCallColumns(n int) callColumns {
	return callColumns{nums: make([]*int32, n), durations: make([]*int32, n), starts: make([]*time.Time, n),
		statuses: make([]*int32, n), responses: make([]*string, n)}
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
}

// attemptsSQL reads the attempt history of one claim's deliveries, in
// order of route and attempt.
const attemptsSQL = `
SELECT route, attempt, started_at, duration_ms, status_code, error, response
FROM webhook_attempts
WHERE provider = $1 AND event_id = $2
ORDER BY route, attempt, started_at`

// Attempts returns the attempt history of the claim (provider, eventID),
// by route, each in order of attempt. withResponse says whether responses
// are read; without it every Response is nil.
func (s *Store) Attempts(ctx context.Context, provider, eventID string, withResponse bool) (map[string][]AttemptRecord, error) {
	rows, err := s.db.Query(ctx, attemptsSQL, provider, eventID)
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of %s/%s: %w", provider, eventID, err)
	}
	out := map[string][]AttemptRecord{}
	var route string
	var a AttemptRecord
	_, err = pgx.ForEachRow(rows, []any{&route, &a.Attempt, &a.StartedAt, &a.DurationMS, &a.StatusCode, &a.Error, &a.Response}, func() error {
		r := a
		if !withResponse {
			r.Response = nil
		}
		out[route] = append(out[route], r)
		a = AttemptRecord{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of %s/%s: %w", provider, eventID, err)
	}
	return out, nil
}
