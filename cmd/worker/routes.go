package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

const routesUsage = `worker routes list [--json]
       worker routes pause NAME
       worker routes resume NAME`

// routesCommand is `worker routes`: each route's backlog and state, and
// pausing and resuming one route across every worker through River's queue
// pause. They need DATABASE_URL and the config file, but no secrets. common
// holds the flags given before `routes`, which the command's own override.
type routesCommand struct {
	common cli.Common
	env    cli.Env
}

// Run dispatches to the command that args name after any common flags.
func (c *routesCommand) Run(ctx context.Context, args []string) error {
	common := c.common
	fs := cli.NewFlagSet("worker routes", routesUsage, c.env, &common)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("routes needs a command: list, pause or resume (see worker routes --help)")
	}
	command, rest := fs.Arg(0), fs.Args()[1:]
	switch command {
	case "list":
		return (&routesListCommand{common, c.env}).Run(ctx, rest)
	case "pause":
		return (&routesPauseCommand{common, c.env, true}).Run(ctx, rest)
	case "resume":
		return (&routesPauseCommand{common, c.env, false}).Run(ctx, rest)
	case "help":
		fs.Usage()
		return cli.ErrHelp
	}
	return fmt.Errorf("unknown routes command %q: want list, pause or resume (see worker routes --help)", command)
}

// routesDB is what a routes command works with.
type routesDB struct {
	cfg    *config.Config
	store  *claim.Store
	queues *river.Client[pgx.Tx] // insert-only, never started: pauses, resumes and reads queues
	pool   *pgxpool.Pool
}

func openRoutes(ctx context.Context, common cli.Common, env cli.Env) (*routesDB, error) {
	cfg, err := cli.LoadConfig(common, env)
	if err != nil {
		return nil, err
	}
	pool, err := cli.OpenPool(ctx, env)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating job client: %w", err)
	}
	return &routesDB{cfg: cfg, store: claim.NewStore(pool, client, cfg.MaxAttempts), queues: client, pool: pool}, nil
}

// routeView is one route as `routes list` prints it.
type routeView struct {
	claim.RouteState
	Concurrency int `json:"concurrency"`
	Backlog     int `json:"backlog"`
}

// routesListCommand is `worker routes list`.
type routesListCommand struct {
	common cli.Common
	env    cli.Env
}

// Run prints each configured route's deliveries, backlog and state, as a
// table or as JSON lines.
func (c *routesListCommand) Run(ctx context.Context, args []string) error {
	const use = "worker routes list [--json]"
	var (
		common = c.common
		env    = c.env
		asJSON bool
	)
	fs := cli.NewFlagSet("worker routes list", use, env, &common)
	fs.BoolVar(&asJSON, "json", false, "one JSON object per line instead of a table")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], use)
	}
	db, err := openRoutes(ctx, common, env)
	if err != nil {
		return err
	}
	defer db.pool.Close()
	states, err := db.store.RouteStates(ctx, db.queues, routeNames(db.cfg))
	if err != nil {
		return err
	}
	views := make([]routeView, len(states))
	for i, st := range states {
		views[i] = routeView{RouteState: st, Concurrency: db.cfg.Routes[i].Concurrency, Backlog: st.Backlog()}
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		for _, v := range views {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tSTATE\tCONCURRENCY\tPROCESSING\tFAILED\tBACKLOG\tRETRYING\tRUNNING\tQUEUE")
	for _, v := range views {
		state := "active"
		if v.Paused {
			state = "paused since " + stamp(v.PausedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", v.Route, state, v.Concurrency,
			v.Processing, v.Failed, v.Backlog, v.Retryable, v.Running, v.Queue)
	}
	return tw.Flush()
}

// routesPauseCommand is `worker routes pause` (pause true) and `worker
// routes resume`.
type routesPauseCommand struct {
	common cli.Common
	env    cli.Env
	pause  bool
}

// Run pauses or resumes the route args name.
func (c *routesPauseCommand) Run(ctx context.Context, args []string) error {
	verb, env, pause, common := "resume", c.env, c.pause, c.common
	if pause {
		verb = "pause"
	}
	use := "worker routes " + verb + " NAME"
	fs := cli.NewFlagSet("worker routes "+verb, use, env, &common)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("routes %s takes one route NAME (usage: %s)", verb, use)
	}
	name := rest[0]
	db, err := openRoutes(ctx, common, env)
	if err != nil {
		return err
	}
	defer db.pool.Close()
	if _, ok := db.cfg.Route(name); !ok {
		return fmt.Errorf("no route %q in the configuration (routes: %s)", cut(name, 64), strings.Join(routeNames(db.cfg), ", "))
	}
	if pause {
		if err := db.store.PauseRoute(ctx, db.queues, name); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "paused route %s (queue %s): every worker finishes the attempts in flight and starts no new ones; ingest keeps accepting and queueing its events\n",
			name, claim.Queue(name))
		return nil
	}
	was, err := db.store.ResumeRoute(ctx, db.queues, name)
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintf(env.Stdout, "route %s was not paused\n", name)
		return nil
	}
	fmt.Fprintf(env.Stdout, "resumed route %s (queue %s): workers take its queued deliveries again\n", name, claim.Queue(name))
	return nil
}

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
// here or by logPauses, if not by both.
func logPausedRoutes(ctx context.Context, client *river.Client[pgx.Tx], cfg *config.Config, logger *slog.Logger) {
	for _, r := range cfg.Routes {
		q, err := client.QueueGet(ctx, claim.Queue(r.Name))
		switch {
		case errors.Is(err, rivertype.ErrNotFound):
		case err != nil:
			logger.Warn("could not read whether a route is paused", slog.String("route", r.Name), slog.String("error", err.Error()))
		case q.PausedAt != nil:
			logger.Info(pausedMessage, slog.String("queue", q.Name), slog.String("route", r.Name))
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
	events, cancel := client.Subscribe(river.EventKindQueuePaused, river.EventKindQueueResumed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			if ev.Queue == nil {
				continue
			}
			what, attrs := "queue", []any{slog.String("queue", ev.Queue.Name)}
			if route, ok := routeOf[ev.Queue.Name]; ok {
				what, attrs = "route", append(attrs, slog.String("route", route))
			}
			if ev.Kind == river.EventKindQueueResumed {
				logger.Info(what+" resumed", attrs...)
			} else {
				logger.Info(strings.Replace(pausedMessage, "route", what, 1), attrs...)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
