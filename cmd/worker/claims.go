package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

const claimsUsage = `worker claims list [--status S] [--provider P] [--limit N] [--json]
       worker claims show PROVIDER EVENT_ID [--json]
       worker claims retry PROVIDER EVENT_ID [--force]
       worker claims retry --status failed [--provider P]
       ` + claimsPruneUsage + `
       ` + claimsExportUsage

// lastErrorWidth is how much of a last error the tables show; --json and
// `claims show --json` carry it whole.
const lastErrorWidth = 60

// claimsCommands are `worker claims`: operator commands over the claim
// table, one file each. They need DATABASE_URL and the config file (for
// routes' max_attempts), but no secrets. The flags given before `claims`
// are the commands' common flags, which their own flags override.
var claimsCommands = []subcommand{
	{"list", func(c cli.Common, e cli.Env) runner { return &claimsListCommand{c, e} }},
	{"show", func(c cli.Common, e cli.Env) runner { return &claimsShowCommand{c, e} }},
	{"retry", func(c cli.Common, e cli.Env) runner { return &claimsRetryCommand{c, e} }},
	{"prune", func(c cli.Common, e cli.Env) runner { return &claimsPruneCommand{c, e} }},
	{"export", func(c cli.Common, e cli.Env) runner { return &claimsExportCommand{c, e} }},
}

// parse parses flags wherever they sit among the arguments (`show stripe
// evt_1 --json` as well as `show --json stripe evt_1`) and returns the
// positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// openStore connects for a claims command: config, pool, and a store whose
// jobs are inserted by an insert-only River client. The caller closes the
// pool. With cells, it is the first cell's.
func openStore(ctx context.Context, common cli.Common, env cli.Env) (*config.Config, *claim.Store, *pgxpool.Pool, error) {
	return openStoreOf(ctx, common, env, "")
}

// openStoreOf is openStore in provider's cell (the first for "").
func openStoreOf(ctx context.Context, common cli.Common, env cli.Env, provider string) (*config.Config, *claim.Store, *pgxpool.Pool, error) {
	cfg, err := cli.LoadConfig(common, env)
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := cli.OpenCell(ctx, cfg, cfg.ProviderCell(provider), env)
	if err != nil {
		return nil, nil, nil, err
	}
	jobs, err := claim.NewInsertClient(pool, nil, 0)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return cfg, claim.NewStore(pool, jobs, cfg.MaxAttempts), pool, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s for a table column.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// writeJSONLines writes vs to w as JSON Lines, one object a line, the form
// every --json listing uses.
func writeJSONLines[T any](w io.Writer, vs []T) error {
	enc := json.NewEncoder(w)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}
