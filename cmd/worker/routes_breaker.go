package main

import (
	"context"
	"fmt"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/operator"
)

// routesCloseBreakerCommand is `worker routes close-breaker`.
type routesCloseBreakerCommand struct {
	common cli.Common
	env    cli.Env
}

// Run closes the circuit breaker of the route args name, for every worker,
// as POST /api/v1/routes/{name}/breaker/close does.
func (c *routesCloseBreakerCommand) Run(ctx context.Context, args []string) error {
	const use = "worker routes close-breaker NAME"
	env, common := c.env, c.common
	fs := cli.NewFlagSet("worker routes close-breaker", use, env, &common)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("routes close-breaker takes one route NAME (usage: %s)", use)
	}
	name := rest[0]
	db, err := openRoutes(ctx, common, env, name)
	if err != nil {
		return err
	}
	defer db.pool.Close()
	was, released, err := cliActions(db.store, db.pool, db.queues, routeNames(db.cfg)).CloseBreaker(operator.CLI(ctx), name)
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintf(env.Stdout, "the circuit of route %s was closed already\n", name)
		return nil
	}
	fmt.Fprintf(env.Stdout, "closed the circuit of route %s: %s released; workers send its waiting deliveries again\n", name,
		operator.Plural(released, "held delivery", "held deliveries"))
	return nil
}
