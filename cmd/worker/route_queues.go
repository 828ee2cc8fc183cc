package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// The serving worker's side of route queues: placing waiting jobs on them
// at start, and logging pauses as the worker applies them.

// moveToRouteQueues puts waiting delivery jobs on the queues of their
// routes before the worker starts: those enqueued on the default queue
// before routes had queues, and those of routes no longer configured
// (which go back to the default queue). The worker keeps working the
// default queue, so a job this misses is still delivered.
func moveToRouteQueues(ctx context.Context, store *claim.Store, cfg *config.Config, logger *slog.Logger) error {
	moved, err := store.MoveJobsToRouteQueues(ctx, routeNames(cfg))
	if err != nil {
		return err
	}
	if moved > 0 {
		logger.Info("moved waiting delivery jobs to their routes' queues", slog.Int("jobs", moved))
	}
	return nil
}

// routeNames returns the names of the configured routes, in file order.
func routeNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Routes))
	for i, r := range cfg.Routes {
		names[i] = r.Name
	}
	return names
}

// pausedMessage is what a worker logs for each route it will not attempt.
const pausedMessage = "route paused: no new attempts until it is resumed"

// logPausedRoutes logs each route that is paused as the worker starts: its
// queue starts paused, which River announces to no subscriber. Called after
// the River client has started, so a pause that lands meanwhile is logged
// here, by logPauses, or by both.
func logPausedRoutes(ctx context.Context, store *claim.Store, q claim.Queues, cfg *config.Config, logger *slog.Logger) {
	for _, r := range cfg.Routes {
		paused, err := store.RoutePaused(ctx, q, r.Name)
		switch {
		case err != nil:
			logger.Warn("could not read whether a route is paused", slog.String("route", r.Name), slog.String("error", err.Error()))
		case paused:
			logger.Info(pausedMessage, slog.String("queue", claim.Queue(r.Name)), slog.String("route", r.Name))
		}
	}
}

// logPauses logs each pause and resume of a queue as this worker applies
// it, naming the route, so that an operator sees every worker take a
// `routes pause` in. It stops when stop is called.
func logPauses(client *river.Client[pgx.Tx], cfg *config.Config, logger *slog.Logger) (stop func()) {
	routeOf := make(map[string]string, len(cfg.Routes))
	for _, r := range cfg.Routes {
		routeOf[claim.Queue(r.Name)] = r.Name
	}
	return claim.WatchQueuePauses(client, func(queue string, resumed bool) {
		what, attrs := "queue", []any{slog.String("queue", queue)}
		if route, ok := routeOf[queue]; ok {
			what, attrs = "route", append(attrs, slog.String("route", route))
		}
		if resumed {
			logger.Info(what+" resumed", attrs...)
		} else {
			logger.Info(strings.Replace(pausedMessage, "route", what, 1), attrs...)
		}
	})
}
