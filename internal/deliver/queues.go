package deliver

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// callSlots is how many River slots a route's queue has per call it may
// have in flight. A job holds a slot for its whole cycle (River's fetch
// and dispatch, the batched load, the call, the batched end), but a call
// token (routeRuntime.calls) only for the load and the call, so the route's
// concurrency bounds its calls exactly while the rest of the cycle runs
// beside them.
const callSlots = 4

// Queues returns the River queues a worker works: one per configured route,
// named claim.Queue(route), with callSlots times the route's concurrency
// as MaxWorkers (at most River's limit), so that River can pause one route
// alone while the worker's call tokens bound the attempts in flight to it;
// and the default queue, with worker.concurrency, for the reconciler, for
// jobs of routes no longer configured (failed with the reason), and for
// jobs enqueued there before routes had queues.
//
// Both bounds are per worker process: N workers run up to N times a
// route's concurrency of calls at once.
//
// A paced route's queue has fewer slots: about as many jobs as its rate
// lets through in rateWait and a second more (the time River's fetch
// takes to bring the next ones), plus one; so that a worker does not fetch
// far more than it can send before its jobs would have to be snoozed.
// A job that stays unfetched keeps its place in River's order (priority,
// scheduled_at, id), where a snoozed one would go behind it.
func Queues(cfg *config.Config) map[string]river.QueueConfig {
	queues := make(map[string]river.QueueConfig, len(cfg.Routes)+1)
	queues[river.QueueDefault] = river.QueueConfig{MaxWorkers: cfg.Worker.Concurrency}
	for _, r := range cfg.Routes {
		slots := min(callSlots*r.Concurrency, river.QueueNumWorkersMax)
		if r.Rate != nil {
			slots = min(slots, rateSlots(*r.Rate, rateWait(cfg)+time.Second)+1)
		}
		queues[claim.Queue(r.Name)] = river.QueueConfig{MaxWorkers: slots}
	}
	return queues
}

// rateSlots is how many requests rate lets through in d, rounded up.
func rateSlots(rate config.Rate, d time.Duration) int {
	return int((int64(rate.Limit)*int64(d) + int64(rate.Per) - 1) / int64(rate.Per))
}
