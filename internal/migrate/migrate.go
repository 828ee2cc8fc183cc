// Package migrate brings a database up to the schema both binaries expect:
// River's tables and hookgate's own, under one advisory lock so that replicas
// starting at once take turns instead of racing.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hookgate/hookgate/migrations"
)

// lockKey identifies hookgate's migration advisory lock. Neither River's
// migrator nor goose (as used here) takes one, so this lock is what makes
// concurrent `migrate` runs safe.
const lockKey int64 = 0x686f6f6b67617465 // "hookgate"

// Result says what one Up applied; both slices are empty when the database
// was already current.
type Result struct {
	River    []int   // River migration versions applied
	Hookgate []int64 // hookgate migration versions applied
}

// Changed reports whether Up applied anything.
func (r Result) Changed() bool { return len(r.River)+len(r.Hookgate) > 0 }

// String describes the result for an operator.
func (r Result) String() string {
	if !r.Changed() {
		return "database schema is up to date; nothing to apply"
	}
	return fmt.Sprintf("applied River migrations %v and hookgate migrations %v", r.River, r.Hookgate)
}

// Up applies River's migrations, then hookgate's, holding a session advisory
// lock on a dedicated connection for the whole run. It is idempotent.
func Up(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (Result, error) {
	var res Result
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("connecting to the database: %w", err)
	}
	defer conn.Release()
	if err := lock(ctx, conn); err != nil {
		return res, err
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx is done.
		// If this fails the session ends with the connection anyway.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return res, fmt.Errorf("preparing River migrations: %w", err)
	}
	rr, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return res, fmt.Errorf("applying River migrations: %w", err)
	}
	for _, v := range rr.Versions {
		res.River = append(res.River, v.Version)
	}

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	applied, err := upHookgate(ctx, db)
	if err != nil {
		return res, err
	}
	res.Hookgate = applied
	return res, nil
}

// lockPoll is how often a run waiting for another's migration lock tries
// again.
const lockPoll = 200 * time.Millisecond

// lock takes the migration lock on conn, trying every lockPoll until ctx
// ends. It polls rather than waiting in pg_advisory_lock: a statement
// waiting there holds a snapshot for as long as it waits, and CREATE INDEX
// CONCURRENTLY (in a migration without a transaction) waits for every
// older snapshot of its database to go, so the run holding the lock would
// wait for the runs waiting for it, for ever.
func lock(ctx context.Context, conn *pgxpool.Conn) error {
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockKey).Scan(&got); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another migrate run's lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

func upHookgate(ctx context.Context, db *sql.DB) ([]int64, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("preparing hookgate migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("applying hookgate migrations: %w", err)
	}
	var applied []int64
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}
