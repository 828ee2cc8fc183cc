package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/migrate"
)

// CellPool is one cell's name and pool.
type CellPool = cell.Pool

// openCells opens a pool per cell, in order. With one cell, a server that
// does not answer stops the start, as it always has. With several, a cell
// that does not answer is logged and its pool kept (it connects once the
// server is back): a cell fails alone, at start as when running.
func openCells(ctx context.Context, cells []config.CellURL, logger *slog.Logger, opts ...PoolOption) ([]CellPool, error) {
	out := make([]CellPool, 0, len(cells))
	closeAll := func() {
		for _, c := range out {
			c.Pool.Close()
		}
	}
	for _, c := range cells {
		pool, err := newPool(ctx, c, opts...)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("cell %s: %w", c.Name, err)
		}
		if err := ping(ctx, pool); err != nil {
			if len(cells) == 1 {
				pool.Close()
				return nil, err
			}
			logger.Warn("cell unreachable at start; its providers get 503 until it answers",
				slog.String("cell", c.Name), slog.String("error", err.Error()))
		}
		out = append(out, CellPool{Name: c.Name, Pool: pool})
	}
	return out, nil
}

// OpenFirstCell loads nothing but connects to the first cell of cfg (the
// DATABASE_URL without cells:), where the operator commands read for now.
func OpenFirstCell(ctx context.Context, cfg *config.Config, env Env) (*pgxpool.Pool, error) {
	return OpenCell(ctx, cfg, cfg.CellList()[0].Name, env)
}

// OpenCell connects to the cell of cfg named name.
func OpenCell(ctx context.Context, cfg *config.Config, name string, env Env) (*pgxpool.Pool, error) {
	if len(cfg.Cells) == 0 {
		return OpenPool(ctx, env)
	}
	cells, err := cfg.ResolveCells(env.Getenv)
	if err != nil {
		return nil, err
	}
	for _, c := range cells {
		if c.Name == name {
			return OpenURL(ctx, c)
		}
	}
	return nil, fmt.Errorf("no cell is named %q", name)
}

// migrateCells returns the cells migrate works on: those of the config
// file when it can be read and lists some, else DATABASE_URL, so that
// migrate still needs nothing but DATABASE_URL without cells:.
func migrateCells(c Common, env Env) ([]config.CellURL, error) {
	cfg, err := LoadConfig(c, env)
	if err != nil || len(cfg.Cells) == 0 {
		url := env.Getenv("DATABASE_URL")
		if url == "" {
			if err != nil {
				return nil, fmt.Errorf("DATABASE_URL is not set, and the config file names no cells: %w", err)
			}
			return nil, fmt.Errorf("DATABASE_URL is not set")
		}
		return []config.CellURL{{Name: config.DefaultCell, URL: url, Key: "DATABASE_URL"}}, nil
	}
	return cfg.ResolveCells(env.Getenv)
}

// migrateCell migrates one cell under its own advisory lock (migrate.Up),
// naming it in the output when there are several.
func migrateCell(ctx context.Context, c config.CellURL, named bool, env Env) error {
	pool, err := OpenURL(ctx, c)
	if err != nil {
		if named {
			return fmt.Errorf("cell %s: %w", c.Name, err)
		}
		return err
	}
	defer pool.Close()
	res, err := migrate.Up(ctx, pool, Logger(env))
	if err != nil {
		if named {
			return fmt.Errorf("cell %s: %w", c.Name, err)
		}
		return err
	}
	if named {
		fmt.Fprintf(env.Stdout, "cell %s: %s\n", c.Name, res)
		return nil
	}
	fmt.Fprintln(env.Stdout, res)
	return nil
}

// Close closes every cell's pool.
func (s *Server) Close() {
	for _, c := range s.Cells {
		c.Pool.Close()
	}
}
