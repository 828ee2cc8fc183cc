package deliver

import (
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// Queues returns the River queues a worker works: one per configured route,
// named claim.Queue(route), whose MaxWorkers is the route's concurrency, so
// that River bounds the attempts in flight to each route and can pause one
// route alone; and the default queue, with worker.concurrency, for the
// reconciler, for jobs of routes no longer configured (failed with the
// reason), and for jobs enqueued there before routes had queues.
//
// River applies MaxWorkers per client, that is per worker process: N
// workers run up to N times a route's concurrency at once.
func Queues(cfg *config.Config) map[string]river.QueueConfig {
	queues := make(map[string]river.QueueConfig, len(cfg.Routes)+1)
	queues[river.QueueDefault] = river.QueueConfig{MaxWorkers: cfg.Worker.Concurrency}
	for _, r := range cfg.Routes {
		queues[claim.Queue(r.Name)] = river.QueueConfig{MaxWorkers: r.Concurrency}
	}
	return queues
}
