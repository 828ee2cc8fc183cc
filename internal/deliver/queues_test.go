package deliver

import (
	"testing"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Worker: config.Worker{Concurrency: 100},
		Routes: []config.Route{
			{Name: "ship-order", Concurrency: 2},
			{Name: "mail", Concurrency: 100},
			{Name: "odd--name", Concurrency: 7},
			{Name: "wide", Concurrency: config.MaxConcurrency},
		},
	}
	require.Equal(t, map[string]river.QueueConfig{
		river.QueueDefault: {MaxWorkers: 100},
		"route-ship-order": {MaxWorkers: 8},
		"route-mail":       {MaxWorkers: 400},
		"routeh-2fc180d43ffa7eaafb3d202b79b2f7fa": {MaxWorkers: 28},
		"route-wide": {MaxWorkers: river.QueueNumWorkersMax},
	}, Queues(cfg))
}
