package claim

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// The River clients hookgate runs, and the calls it makes on them outside
// a job's own work: the other half of the seam with River (riverseam.go
// holds the statements on its tables). Both are checked against
// riverChecked.

// NewInsertClient returns a River client that only inserts jobs: never
// started and with no workers, so a process that holds one (ingest, the
// worker's commands) links no worker code and runs no leader. A nil
// logger is River's default; a zero fetchCooldown, River's default
// debounce of the insert notifications.
func NewInsertClient(pool *pgxpool.Pool, logger *slog.Logger, fetchCooldown time.Duration) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger, FetchCooldown: fetchCooldown})
	if err != nil {
		return nil, fmt.Errorf("creating job client: %w", err)
	}
	return client, nil
}

// NewWorkClient returns the River client that works delivery and
// maintenance jobs, as cfg configures it (its workers, queues, periodic
// jobs and timeouts): the serving worker's.
func NewWorkClient(pool *pgxpool.Pool, cfg *river.Config) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating job client: %w", err)
	}
	return client, nil
}

// OldestDueDelivery returns a measurement of the age of the oldest
// delivery job that is due and not yet fetched, counted from the time it
// became due. That is an available job, or a scheduled or retryable one
// whose time has come: River's leader makes those available, so with every
// worker down they stay scheduled, and they must count all the same. Jobs
// in a paused queue (a paused route) wait on purpose and do not count. It
// uses River's job and queue lists, not its tables.
func OldestDueDelivery(client *river.Client[pgx.Tx]) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		queues, err := client.QueueList(ctx, river.NewQueueListParams().First(10000))
		if err != nil {
			return 0, fmt.Errorf("listing queues: %w", err)
		}
		paused := []string{}
		for _, q := range queues.Queues {
			if q.PausedAt != nil {
				paused = append(paused, q.Name)
			}
		}
		params := river.NewJobListParams().
			Kinds(DeliveryKind).
			States(rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable).
			Where("scheduled_at <= now() AND NOT queue = ANY(@paused::text[])", river.NamedArgs{"paused": paused}).
			OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).
			First(1)
		res, err := client.JobList(ctx, params)
		if err != nil {
			return 0, fmt.Errorf("listing the oldest queued delivery job: %w", err)
		}
		if len(res.Jobs) == 0 {
			return 0, nil
		}
		return max(time.Since(res.Jobs[0].ScheduledAt), 0), nil
	}
}

// RoutePaused reports whether route's queue is paused; a queue no worker
// has run and none has paused is not.
func (s *Store) RoutePaused(ctx context.Context, q Queues, route string) (bool, error) {
	pausedAt, _, err := s.river().QueueGetPausedAt(ctx, q, Queue(route))
	if err != nil {
		return false, fmt.Errorf("reading queue %s of route %s: %w", Queue(route), route, err)
	}
	return pausedAt != nil, nil
}

// WatchQueuePauses calls fn with each queue this client pauses or resumes
// (resumed says which), as the client applies it, until stop is called.
// fn runs on one goroutine of its own, one event at a time.
func WatchQueuePauses(client *river.Client[pgx.Tx], fn func(queue string, resumed bool)) (stop func()) {
	events, cancel := client.Subscribe(river.EventKindQueuePaused, river.EventKindQueueResumed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			if ev.Queue != nil {
				fn(ev.Queue.Name, ev.Kind == river.EventKindQueueResumed)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
