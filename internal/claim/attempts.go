package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// attemptHistorySQL writes the attempt history rows of the attempts that
// recordAttemptsSQL, queued right after it in the same transaction, will
// record: those whose delivery is processing and, when they name their
// job, whose job still runs that attempt. The claims' locks (and the
// jobs', in EndJobs) are held, so nothing can change either between the
// two statements, and both see the same set. Each delivery is found by its
// primary key, as in recordAttemptsSQL.
var attemptHistorySQL = `
INSERT INTO webhook_attempts (provider, event_id, route, attempt, started_at, duration_ms, status_code, error, response)
SELECT v.provider, v.event_id, v.route, v.attempt, v.started_at, v.duration_ms, v.status_code, v.error, v.response
FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::int[], $7::int[], $8::text[], $9::text[],
            $10::bigint[], $11::int[])
    AS v(provider, event_id, route, attempt, started_at, duration_ms, status_code, error, response, job, job_attempt)
CROSS JOIN LATERAL (
    SELECT x.status FROM webhook_deliveries x
    WHERE x.provider = v.provider AND x.event_id = v.event_id AND x.route = v.route
    LIMIT 1) x
WHERE x.status = 'processing'
  AND (v.job IS NULL OR ` + riverTables{}.jobRunningSQL("v.job", "v.job_attempt") + `)`

// queueAttemptHistory queues attemptHistorySQL for the attempts that made
// a call, before queueRecordAttempts queues their outcomes. It queues
// nothing when none did.
func queueAttemptHistory(b *pgx.Batch, attempts []Attempt, jobs []JobRun) {
	var (
		providers, ids, routes []string
		nums, durations        []int32
		starts                 []time.Time
		statuses               []*int32
		errs, responses        []*string
		jobIDs                 []*int64
		jobAttempts            []int32
	)
	for i, a := range attempts {
		c := a.Result.Call
		if c == nil {
			continue
		}
		providers, ids, routes = append(providers, a.Key.Provider), append(ids, a.Key.EventID), append(routes, a.Key.Route)
		nums, starts = append(nums, int32(c.Attempt)), append(starts, c.StartedAt)
		durations = append(durations, int32(min(c.Duration.Milliseconds(), 1<<31-1)))
		var status *int32
		if c.Status != 0 {
			s := int32(c.Status)
			status = &s
		}
		statuses = append(statuses, status)
		var e *string
		if a.Result.Error != "" {
			e = &a.Result.Error
		}
		errs, responses = append(errs, e), append(responses, c.Response)
		var job *int64
		var jobAttempt int32
		if jobs != nil {
			job, jobAttempt = &jobs[i].ID, int32(jobs[i].Attempt)
		}
		jobIDs, jobAttempts = append(jobIDs, job), append(jobAttempts, jobAttempt)
	}
	if len(providers) == 0 {
		return
	}
	b.Queue(attemptHistorySQL, providers, ids, routes, nums, starts, durations, statuses, errs, responses, jobIDs, jobAttempts).
		Exec(func(pgconn.CommandTag) error { return nil })
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
