package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/maintenance"
)

const claimsPruneUsage = "worker claims prune [--dry-run] [--json]"

// pruneReport is what `claims prune --json` prints.
type pruneReport struct {
	claim.PruneResult
	DryRun bool `json:"dry_run"`
}

// claimsPruneCommand is `worker claims prune`.
type claimsPruneCommand struct {
	common cli.Common
	env    cli.Env
}

// Run applies the retention the worker applies every retention.interval
// once, now, with the config file's retention settings, and prints what it
// did.
func (c *claimsPruneCommand) Run(ctx context.Context, args []string) error {
	var (
		common = c.common
		env    = c.env
		dryRun bool
		asJSON bool
	)
	fs := cli.NewFlagSet("worker claims prune", claimsPruneUsage, env, &common)
	fs.BoolVar(&dryRun, "dry-run", false, "count what would be deleted and cleared, changing nothing")
	fs.BoolVar(&asJSON, "json", false, "one JSON object instead of text")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], claimsPruneUsage)
	}
	cfg, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()
	policy := maintenance.Policy(cfg.Retention)
	var res claim.PruneResult
	if dryRun {
		res, err = store.PruneDue(ctx, policy)
	} else {
		res, err = store.Prune(ctx, policy)
	}
	if err != nil {
		if !dryRun && res != (claim.PruneResult{}) {
			return fmt.Errorf("after deleting %s and clearing %s: %w", plural(res.Deleted, "claim", "claims"),
				plural(res.PayloadsCleared, "payload", "payloads"), err)
		}
		return err
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(pruneReport{PruneResult: res, DryRun: dryRun})
	}
	verb, clear := "deleted", "cleared"
	if dryRun {
		verb, clear = "would delete", "would clear"
	}
	_, err = fmt.Fprintf(env.Stdout, "%s %s (terminal for over %s) and %s %s (terminal for over %s)\n",
		verb, plural(res.Deleted, "claim", "claims"), cfg.Retention.Claims.D(),
		clear, plural(res.PayloadsCleared, "payload", "payloads"), cfg.Retention.Payloads.D())
	return err
}
