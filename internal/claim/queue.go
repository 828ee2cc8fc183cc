package claim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Each route's delivery jobs live on a River queue of the route's own, so
// that River's per-queue MaxWorkers bounds the attempts in flight to it and
// River's queue pause stops them. The default queue keeps the reconciler's
// periodic job, the jobs of routes no longer configured (the worker fails
// those with the reason) and jobs inserted before route queues existed.

const (
	// routeQueuePrefix starts the readable form of a route's queue name.
	routeQueuePrefix = "route-"
	// hashedQueuePrefix starts the hashed form, for route names that are
	// not valid in a queue name. It differs from routeQueuePrefix in its
	// sixth byte, so the two forms never collide.
	hashedQueuePrefix = "routeh-"
	// maxQueueName is River's limit on a queue name's length.
	maxQueueName = 64
)

// queueNameRE is River's rule for queue names (river.validateQueueName):
// lower-case letters and digits, runs separated by one _, | or -.
var queueNameRE = regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`)

// Queue returns the River queue of route's delivery jobs: "route-" + the
// route's name where that is a valid queue name (e.g. route-ship-order),
// else "routeh-" + 32 hex digits of the name's SHA-256 (names with "--",
// "__" or a trailing - or _, and names over 58 characters). It is a pure
// function of the name, so every process, every insert path and every
// version of hookgate agree on it; distinct names get distinct queues.
func Queue(route string) string {
	if q := routeQueuePrefix + route; len(q) <= maxQueueName && queueNameRE.MatchString(q) {
		return q
	}
	sum := sha256.Sum256([]byte(route))
	return hashedQueuePrefix + hex.EncodeToString(sum[:16])
}

// jobParams is the insert of the delivery job of one event for route,
// for every path that enqueues one (claim, reopen, retry, reconcile): on the
// route's queue with its max_attempts, or, for a route that is not
// configured (max_attempts 0), on the default queue with River's default,
// where a worker still takes it and fails the delivery with the reason.
func (s *Store) jobParams(provider, eventID, route string) river.InsertManyParams {
	opts := &river.InsertOpts{MaxAttempts: s.limit(route), Queue: river.QueueDefault}
	if opts.MaxAttempts > 0 {
		opts.Queue = Queue(route)
	}
	return river.InsertManyParams{
		Args:       DeliveryArgs{Provider: provider, EventID: eventID, Route: route},
		InsertOpts: opts,
	}
}

// moveBatch is how many jobs one statement of MoveJobsToRouteQueues moves,
// so that a large backlog is never locked by one long transaction.
const moveBatch = 1000

// MoveJobsToRouteQueues puts every waiting delivery job on the queue it
// belongs to given routes, the names of the configured routes: its route's
// queue, or the default queue for a route not among them. It is how jobs
// enqueued on the default queue before routes had queues come under their
// route's concurrency and pause, and how the jobs of a route removed from
// the configuration reach a queue that workers still work. River has no
// call that changes a job's queue, so this updates River's table itself
// (see riverTables.JobMoveToRouteQueues); it is safe while workers run. It returns how many jobs it moved.
func (s *Store) MoveJobsToRouteQueues(ctx context.Context, routes []string) (int, error) {
	queues := make([]string, len(routes))
	for i, r := range routes {
		queues[i] = Queue(r)
	}
	moved := 0
	for {
		n, err := s.river().JobMoveToRouteQueues(ctx, routes, queues, moveBatch)
		if err != nil {
			return moved, fmt.Errorf("moving delivery jobs to their routes' queues: %w", err)
		}
		moved += n
		if n < moveBatch {
			return moved, nil
		}
	}
}

// Queues is the part of a River client that reads, pauses and resumes
// queues. Pause and resume are stored in Postgres, so they hold for every
// worker process, and River's UI shows them. The …Tx forms let a pause or
// resume commit with its audit row.
type Queues interface {
	QueueGet(ctx context.Context, name string) (*rivertype.Queue, error)
	QueuePause(ctx context.Context, name string, opts *river.QueuePauseOpts) error
	QueueResume(ctx context.Context, name string, opts *river.QueuePauseOpts) error
	QueueGetTx(ctx context.Context, tx pgx.Tx, name string) (*rivertype.Queue, error)
	QueuePauseTx(ctx context.Context, tx pgx.Tx, name string, opts *river.QueuePauseOpts) error
	QueueResumeTx(ctx context.Context, tx pgx.Tx, name string, opts *river.QueuePauseOpts) error
}

// RouteState is one route's deliveries and queue, for `worker routes list`.
type RouteState struct {
	Route string `json:"route"`
	Queue string `json:"queue"`
	// Processing, Waiting and Failed count the route's deliveries in
	// those states; a waiting one runs once the routes it runs after have
	// completed for its event.
	Processing int `json:"processing"`
	Waiting    int `json:"waiting"`
	Failed     int `json:"failed"`
	// Available counts its jobs waiting for a worker; Retryable, those
	// waiting for the time of their next attempt; Running, those being
	// attempted. Available + Retryable are its QueuedJobs (the views'
	// "backlog").
	Available int `json:"available"`
	Retryable int `json:"retryable"`
	Running   int `json:"running"`
	// Paused is whether the route's queue is paused, since PausedAt.
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Breaker is the route's circuit breaker, which holds apart from a
	// pause: a paused route stays paused whatever it says.
	Breaker Breaker `json:"breaker"`
}

// QueuedJobs counts the route's jobs waiting to run: available now, or at
// the time of their next attempt.
func (r RouteState) QueuedJobs() int { return r.Available + r.Retryable }

// routeDeliveriesSQL counts the processing, waiting and failed deliveries
// of routes. A processing delivery's claim is processing, and a waiting or
// failed one's is processing or failed, so it reads deliveries through the
// claims' partial indexes of those two statuses (one each: migration 15)
// rather than scanning every delivery ever made.
const routeDeliveriesSQL = `
SELECT d.route,
       count(*) FILTER (WHERE d.status = 'processing'),
       count(*) FILTER (WHERE d.status = 'waiting'),
       count(*) FILTER (WHERE d.status = 'failed')
FROM (SELECT provider, event_id FROM webhook_event_claims WHERE status = 'processing'
      UNION ALL
      SELECT provider, event_id FROM webhook_event_claims WHERE status = 'failed') c
JOIN webhook_deliveries d ON d.provider = c.provider AND d.event_id = c.event_id
WHERE d.route = ANY($1)
GROUP BY d.route`

// RouteStates returns the state of each of routes, in that order.
func (s *Store) RouteStates(ctx context.Context, q Queues, routes []string) ([]RouteState, error) {
	states := make([]RouteState, len(routes))
	byRoute := make(map[string]*RouteState, len(routes))
	for i, r := range routes {
		states[i] = RouteState{Route: r, Queue: Queue(r)}
		byRoute[r] = &states[i]
	}
	rows, err := s.db.Query(ctx, routeDeliveriesSQL, routes)
	if err != nil {
		return nil, fmt.Errorf("counting deliveries by route: %w", err)
	}
	var route string
	var processing, waiting, failed int
	if _, err := pgx.ForEachRow(rows, []any{&route, &processing, &waiting, &failed}, func() error {
		byRoute[route].Processing, byRoute[route].Waiting, byRoute[route].Failed = processing, waiting, failed
		return nil
	}); err != nil {
		return nil, fmt.Errorf("counting deliveries by route: %w", err)
	}
	if err := s.river().JobCountByRoute(ctx, routes, func(route string, available, retryable, running int) {
		st := byRoute[route]
		st.Available, st.Retryable, st.Running = available, retryable, running
	}); err != nil {
		return nil, fmt.Errorf("counting jobs by route: %w", err)
	}
	breakers, err := s.Breakers(ctx, routes)
	if err != nil {
		return nil, err
	}
	for i := range states {
		states[i].Breaker = breakers[states[i].Route]
		// A queue not found: no worker has run it yet, and it was never paused.
		pausedAt, _, err := s.river().QueueGetPausedAt(ctx, q, states[i].Queue)
		if err != nil {
			return nil, fmt.Errorf("reading queue %s of route %s: %w", states[i].Queue, states[i].Route, err)
		}
		states[i].Paused, states[i].PausedAt = pausedAt != nil, pausedAt
	}
	return states, nil
}

// PauseRoute pauses route's queue: every worker finishes the attempts it
// has in flight to the route and starts no new ones, while ingest keeps
// enqueueing. Waiting jobs keep their attempts. A queue no worker has run
// yet is registered first, as a worker would at start, so that workers
// started later begin paused. In a store Transact handed out, the pause
// commits with the transaction (and its audit row); else it is one of its
// own.
func (s *Store) PauseRoute(ctx context.Context, q Queues, route string) error {
	name := Queue(route)
	return s.inTx(ctx, func(tx *Store) error {
		if err := tx.river().QueuePauseTx(ctx, q, tx.tx, name); err != nil {
			return fmt.Errorf("pausing queue %s of route %s: %w", name, route, err)
		}
		return nil
	})
}

// ResumeRoute resumes route's queue, and reports whether it was paused; in
// a store Transact handed out, in its transaction.
func (s *Store) ResumeRoute(ctx context.Context, q Queues, route string) (wasPaused bool, err error) {
	name := Queue(route)
	err = s.inTx(ctx, func(tx *Store) error {
		pausedAt, found, err := tx.river().QueueGetPausedAtTx(ctx, q, tx.tx, name)
		if err != nil {
			return fmt.Errorf("reading queue %s of route %s: %w", name, route, err)
		}
		if !found {
			return nil
		}
		if err := tx.river().QueueResumeTx(ctx, q, tx.tx, name); err != nil {
			return fmt.Errorf("resuming queue %s of route %s: %w", name, route, err)
		}
		wasPaused = pausedAt != nil
		return nil
	})
	return wasPaused, err
}
