package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/operator"
)

const routesUsage = `worker routes list [--json]
       worker routes pause NAME
       worker routes resume NAME
       worker routes close-breaker NAME`

// routesCommands are `worker routes`: each route's backlog and state,
// pausing and resuming one route across every worker through River's queue
// pause, and closing a route's circuit breaker by hand. They need DATABASE_URL and the config file, but no secrets.
var routesCommands = []subcommand{
	{"list", func(c cli.Common, e cli.Env) runner { return &routesListCommand{c, e} }},
	{"pause", func(c cli.Common, e cli.Env) runner { return &routesPauseCommand{c, e, true} }},
	{"resume", func(c cli.Common, e cli.Env) runner { return &routesPauseCommand{c, e, false} }},
	{"close-breaker", func(c cli.Common, e cli.Env) runner { return &routesCloseBreakerCommand{c, e} }},
}

// routesDB is what a routes command works with.
type routesDB struct {
	cfg    *config.Config
	store  *claim.Store
	queues *river.Client[pgx.Tx] // insert-only, never started: pauses, resumes and reads queues
	pool   *pgxpool.Pool
}

// openRoutes connects to the cell of route (its provider's), where its
// pause and breaker live, or to the first cell when route is "".
func openRoutes(ctx context.Context, common cli.Common, env cli.Env, route string) (*routesDB, error) {
	cfg, err := cli.LoadConfig(common, env)
	if err != nil {
		return nil, err
	}
	cell := cfg.CellList()[0].Name
	if _, ok := cfg.Route(route); ok {
		cell = cfg.RouteCell(route)
	}
	pool, err := cli.OpenCell(ctx, cfg, cell, env)
	if err != nil {
		return nil, err
	}
	client, err := claim.NewInsertClient(pool, nil, 0)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &routesDB{cfg: cfg, store: claim.NewStore(pool, client, cfg.MaxAttempts), queues: client, pool: pool}, nil
}

// routeView is one route as `routes list` prints it.
type routeView struct {
	claim.RouteState
	Concurrency int `json:"concurrency"`
	Backlog     int `json:"backlog"`
	// RetryStatuses are the 4xx codes the route retries; empty, never null, when none.
	RetryStatuses []int `json:"retry_statuses"`
	// BreakerOn is whether the route has a circuit breaker (breaker: off
	// turns it off).
	BreakerOn bool `json:"breaker_on"`
	// Rate is the route's rate; null when it is not paced.
	Rate *claim.RateInfo `json:"rate"`
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
	cfg, err := cli.LoadConfig(common, env)
	if err != nil {
		return err
	}
	states, err := routeStates(ctx, cfg, env)
	if err != nil {
		return err
	}
	views := make([]routeView, len(states))
	for i, st := range states {
		r := cfg.Routes[i]
		views[i] = routeView{RouteState: st, Concurrency: r.Concurrency, Backlog: st.QueuedJobs(),
			RetryStatuses: append([]int{}, r.RetryStatuses...), BreakerOn: r.Breaker.On()}
		if r.Rate != nil {
			views[i].Rate = &claim.RateInfo{Limit: r.Rate.Limit, Per: r.Rate.Per.D().String(), Burst: r.Rate.Burst, HeldUntil: st.HeldUntil}
		}
	}
	if asJSON {
		return writeJSONLines(env.Stdout, views)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tSTATE\tBREAKER\tRATE\tCONCURRENCY\tPROCESSING\tWAITING\tFAILED\tBACKLOG\tHELD\tRETRYING\tRUNNING\tQUEUE\tRETRY_STATUSES")
	for i, v := range views {
		state := "active"
		if v.Paused {
			state = "paused since " + stamp(v.PausedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", v.Route, state, breakerCell(v.Breaker, cfg.Routes[i].Breaker.On()),
			rateCell(v.Rate), v.Concurrency, v.Processing, v.Waiting, v.Failed, v.Backlog, heldCell(v.Held, v.HeldUntil), v.Retryable, v.Running, v.Queue,
			statusList(v.RetryStatuses))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, v := range views {
		if story := breakerStory(v.Breaker); story != "" && cfg.Routes[i].Breaker.On() {
			fmt.Fprintf(env.Stdout, "circuit of route %s: %s\n", v.Route, story)
		}
	}
	return nil
}

// rateCell is a route's rate in the table: "5/1s+5", or "-".
func rateCell(r *claim.RateInfo) string {
	if r == nil {
		return "-"
	}
	if r.Burst > 0 {
		return fmt.Sprintf("%d/%s+%d", r.Limit, r.Per, r.Burst)
	}
	return fmt.Sprintf("%d/%s", r.Limit, r.Per)
}

// heldCell is a route's held deliveries in the table, with the end of a
// Retry-After hold: "12 until 2026-12-05T04:00:00Z".
func heldCell(n int, until *time.Time) string {
	if until == nil {
		return strconv.Itoa(n)
	}
	return strconv.Itoa(n) + " until " + stamp(until)
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
	db, err := openRoutes(ctx, common, env, name)
	if err != nil {
		return err
	}
	defer db.pool.Close()
	actions := cliActions(db.store, db.pool, db.queues, routeNames(db.cfg))
	if pause {
		if err := actions.PauseRoute(operator.CLI(ctx), name); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "paused route %s (queue %s): every worker finishes the attempts in flight and starts no new ones; ingest keeps accepting and queueing its events\n",
			name, claim.Queue(name))
		return nil
	}
	was, err := actions.ResumeRoute(operator.CLI(ctx), name)
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

// statusList writes codes as "404,423", or "-" when there are none.
func statusList(codes []int) string {
	if len(codes) == 0 {
		return "-"
	}
	s := make([]string, len(codes))
	for i, c := range codes {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// breakerStory is what a route's breaker tells under the table: an open
// circuit's opening, failures, last failure and next probe; a closed one's
// failures counted so far; "" for a closed circuit that counts none.
func breakerStory(b claim.Breaker) string {
	var parts []string
	switch {
	case b.OpenedAt != nil:
		parts = append(parts, fmt.Sprintf("%s since %s after %d consecutive failures", b.State, stamp(b.OpenedAt), b.Failures))
	case b.Failures > 0:
		parts = append(parts, fmt.Sprintf("%s, %d consecutive failures", b.State, b.Failures))
	default:
		return ""
	}
	if b.LastFailure != nil {
		parts = append(parts, "last failure: "+*b.LastFailure)
	}
	if b.NextProbeAt != nil {
		parts = append(parts, "next probe at "+stamp(b.NextProbeAt))
	}
	return strings.Join(parts, "; ")
}

// breakerCell is a route's breaker as the table shows it: off, closed
// (with the failures counted), open until its next probe, or half_open.
func breakerCell(b claim.Breaker, on bool) string {
	switch {
	case !on:
		return "off"
	case b.State == claim.BreakerOpen && b.NextProbeAt != nil:
		return "open (probe at " + stamp(b.NextProbeAt) + ")"
	case b.State == claim.BreakerClosed && b.Failures > 0:
		return fmt.Sprintf("closed (%d failed)", b.Failures)
	}
	return string(b.State)
}
