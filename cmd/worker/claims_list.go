package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
)

// claimsListCommand is `worker claims list`.
type claimsListCommand struct {
	common cli.Common
	env    cli.Env
}

// Run lists claims newest first, as a table or as JSON lines.
func (c *claimsListCommand) Run(ctx context.Context, args []string) error {
	const use = "worker claims list [--status S] [--provider P] [--limit N] [--json]"
	var (
		common = c.common
		env    = c.env
		f      claim.Search
		status string
		asJSON bool
	)
	fs := cli.NewFlagSet("worker claims list", use, env, &common)
	fs.StringVar(&status, "status", "", "only claims with this status: processing, completed, failed or ignored")
	fs.StringVar(&f.Provider, "provider", "", "only claims of this provider")
	fs.IntVar(&f.Limit, "limit", 50, "at most this many claims, newest first")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per line instead of a table")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], use)
	}
	if status != "" {
		f.Status = claim.Status(status)
		if !validStatus(f.Status) {
			return fmt.Errorf("--status %q: must be processing, completed, failed or ignored", status)
		}
	}
	if f.Limit < 1 {
		return fmt.Errorf("--limit must be at least 1, got %d", f.Limit)
	}
	claims, down, err := searchCells(ctx, common, env, f)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSONLines(env.Stdout, claims); err != nil {
			return err
		}
		return downError(down)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tEVENT ID\tEVENT TYPE\tSTATUS\tATTEMPTS\tFIRST SEEN\tLAST ERROR")
	for _, cl := range claims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cl.Provider, cl.EventID, orDash(cl.EventType), cl.Status,
			cl.AttemptCount, stamp(&cl.FirstSeenAt), orDash(cut(cl.LastError, lastErrorWidth)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return downError(down)
}

// searchCells reads f's page in every cell at once and merges them, newest
// first, cut to f.Limit; down names the cells that could not be read.
func searchCells(ctx context.Context, common cli.Common, env cli.Env, f claim.Search) ([]claim.Record, []string, error) {
	_, cells, down, closeAll, err := cellStores(ctx, common, env)
	if err != nil {
		return nil, nil, err
	}
	defer closeAll()
	pages := make([][]claim.Record, len(cells))
	errs := cell.Each(len(cells), func(i int) (err error) {
		pages[i], err = cells[i].store.SearchClaims(ctx, f)
		return err
	})
	for i, err := range errs {
		if err != nil && len(cells)+len(down) == 1 {
			return nil, nil, err
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "cell %s cannot be read (%v); its claims are left out\n", cells[i].name, err)
			down = append(down, cells[i].name)
		}
	}
	claims, _ := cell.MergeClaims(pages, f.Limit, false)
	return claims, down, nil
}

func validStatus(s claim.Status) bool {
	switch s {
	case claim.Processing, claim.Completed, claim.Failed, claim.Ignored:
		return true
	}
	return false
}
