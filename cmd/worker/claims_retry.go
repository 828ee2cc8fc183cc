package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// claimsRetryCommand is `worker claims retry`.
type claimsRetryCommand struct {
	common cli.Common
	env    cli.Env
}

// Run reopens one claim, or every failed claim, and queues their jobs.
func (c *claimsRetryCommand) Run(ctx context.Context, args []string) error {
	const use = "worker claims retry PROVIDER EVENT_ID [--force] | worker claims retry --status failed [--provider P]"
	var (
		common   = c.common
		env      = c.env
		status   string
		provider string
		force    bool
	)
	fs := cli.NewFlagSet("worker claims retry", use, env, &common)
	fs.StringVar(&status, "status", "", "retry every claim with this status; only failed is accepted")
	fs.StringVar(&provider, "provider", "", "with --status: only claims of this provider")
	fs.BoolVar(&force, "force", false, "also re-run completed deliveries, and accept completed claims (same Idempotency-Keys downstream); skipped deliveries stay skipped")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case status == "" && len(rest) != 2:
		return fmt.Errorf("claims retry takes PROVIDER and EVENT_ID, or --status failed (usage: %s)", use)
	case status != "" && len(rest) > 0:
		return fmt.Errorf("claims retry takes either PROVIDER EVENT_ID or --status, not both (usage: %s)", use)
	case status != "" && status != string(claim.Failed):
		return fmt.Errorf("--status %q: only failed claims can be retried in bulk", status)
	case status == "" && provider != "":
		return fmt.Errorf("--provider applies only with --status failed; name the claim as PROVIDER EVENT_ID")
	}
	if status == "" {
		_, store, pool, err := openStoreOf(ctx, common, env, rest[0])
		if err != nil {
			return err
		}
		defer pool.Close()
		return retryOne(ctx, store, pool, rest[0], rest[1], force, env.Stdout)
	}
	_, cells, down, closeAll, err := cellStores(ctx, common, env)
	if err != nil {
		return err
	}
	defer closeAll()
	if len(down) > 0 {
		return fmt.Errorf("cell %s cannot be reached, and a bulk retry needs every cell: no claim was reopened", down[0])
	}
	return retryFailed(ctx, cells, provider, force, env.Stdout)
}

func retryOne(ctx context.Context, store *claim.Store, pool *pgxpool.Pool, provider, eventID string, force bool, out io.Writer) error {
	res, err := cliActions(store, pool, nil, nil).Retry(operator.CLI(ctx), provider, eventID, force)
	if err != nil {
		return err
	}
	n := res.Deliveries
	fmt.Fprintf(out, "%s/%s: reopened %s; %s queued\n", provider, eventID, plural(n, "delivery", "deliveries"), plural(n, "job", "jobs"))
	if res.Note != "" {
		fmt.Fprintf(out, "%s/%s: %s\n", provider, eventID, res.Note)
	}
	return nil
}

// cliActions returns the operator actions a command takes; each is audited
// as the OS user running it, from the context operator.CLI gives.
func cliActions(store *claim.Store, pool *pgxpool.Pool, queues claim.Queues, routes []string) *operator.Actions {
	return &operator.Actions{Store: store, Queues: queues, Routes: routes}
}

// retryFailed reopens every failed claim of every cell (of provider's
// only, when set), each cell's audited in that cell.
func retryFailed(ctx context.Context, cells []cellStore, provider string, force bool, out io.Writer) error {
	var actions []operator.Cell
	for _, c := range cells {
		actions = append(actions, operator.Cell{Name: c.name, Actions: cliActions(c.store, c.pool, nil, nil)})
	}
	res, err := operator.BulkRetryCells(operator.CLI(ctx), actions, claim.Search{Provider: provider}, force, false, nil,
		func(k claim.EventKey, n int) {
			fmt.Fprintf(out, "%s: reopened %s\n", k, plural(n, "delivery", "deliveries"))
		})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reopened %s of %s\n", plural(res.Deliveries, "delivery", "deliveries"), plural(res.Reopened, "failed claim", "failed claims"))
	return nil
}
