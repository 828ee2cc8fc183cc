package deliver

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Worker: config.Worker{Concurrency: 100, RescueAfter: config.Duration(100 * time.Second)},
		Routes: []config.Route{
			{Name: "ship-order", Concurrency: 2},
			{Name: "mail", Concurrency: 100},
			{Name: "odd--name", Concurrency: 7},
			{Name: "wide", Concurrency: config.MaxConcurrency},
			// 5/s for rateWait (1.25s here) and a second: 11.25, rounded up, and one.
			{Name: "paced", Concurrency: 100, Rate: &config.Rate{Limit: 5, Per: config.Duration(time.Second)}},
			{Name: "slow", Concurrency: 100, Rate: &config.Rate{Limit: 1, Per: config.Duration(time.Minute)}},
			{Name: "fast", Concurrency: 3, Rate: &config.Rate{Limit: 1000, Per: config.Duration(time.Second)}},
		},
	}
	require.Equal(t, map[string]river.QueueConfig{
		river.QueueDefault: {MaxWorkers: 100},
		"route-ship-order": {MaxWorkers: 8},
		"route-mail":       {MaxWorkers: 400},
		"routeh-2fc180d43ffa7eaafb3d202b79b2f7fa": {MaxWorkers: 28},
		"route-wide":  {MaxWorkers: river.QueueNumWorkersMax},
		"route-paced": {MaxWorkers: 13},
		"route-slow":  {MaxWorkers: 2},
		"route-fast":  {MaxWorkers: 12},
	}, Queues(cfg))
}
