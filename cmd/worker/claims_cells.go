package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// The claims commands over cells: a listing reads every cell and merges
// them as one cell would answer; a claim is read and acted on in its
// provider's cell.

// cellStore is one cell's store for a claims command.
type cellStore struct {
	name  string
	store *claim.Store
	pool  *pgxpool.Pool
}

// cellStores connects to every cell of the configuration, in its order.
// With several, a cell that cannot be reached is left out and named in
// down (the command reads the others, then says so); with one, its error
// is the command's, as it always was. close closes the pools.
func cellStores(ctx context.Context, common cli.Common, env cli.Env) (cfg *config.Config, cells []cellStore, down []string, closeAll func(), err error) {
	if cfg, err = cli.LoadConfig(common, env); err != nil {
		return nil, nil, nil, nil, err
	}
	closeAll = func() {
		for _, c := range cells {
			c.pool.Close()
		}
	}
	list := cfg.CellList()
	for _, c := range list {
		pool, err := cli.OpenCell(ctx, cfg, c.Name, env)
		if err != nil && len(list) > 1 {
			fmt.Fprintf(env.Stderr, "cell %s cannot be read (%v); its claims are left out\n", c.Name, err)
			down = append(down, c.Name)
			continue
		}
		if err != nil {
			closeAll()
			return nil, nil, nil, nil, err
		}
		jobs, err := claim.NewInsertClient(pool, nil, 0)
		if err != nil {
			pool.Close()
			closeAll()
			return nil, nil, nil, nil, err
		}
		cells = append(cells, cellStore{name: c.Name, store: claim.NewStore(pool, jobs, cfg.MaxAttempts), pool: pool})
	}
	return cfg, cells, down, closeAll, nil
}

// downError is a listing that left out the cells it could not read, after
// listing the others'.
func downError(down []string) error {
	if len(down) == 0 {
		return nil
	}
	return fmt.Errorf("cells that could not be read, whose claims are not listed: %s", strings.Join(down, ", "))
}
