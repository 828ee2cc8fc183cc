package migrate_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/migrate"
)

// migrationBehindHolder migrates a database at version 15 with the
// session's lock_timeout set to lockTimeout while a transaction holds table
// in SHARE UPDATE EXCLUSIVE (what an autovacuum holds), and returns once
// the migration has waited behind it for longer than wait, failing if it
// ended first. It returns a pool on the database, the holder's
// transaction and the migration's end.
func migrationBehindHolder(t *testing.T, table, lockTimeout string, wait time.Duration) (*pgxpool.Pool, pgx.Tx, <-chan error) {
	t.Helper()
	ctx := context.Background()
	url, pool := migratedTo(t, 15)

	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	hold, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = hold.Exec(ctx, "LOCK TABLE "+table+" IN SHARE UPDATE EXCLUSIVE MODE")
	require.NoError(t, err)

	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = lockTimeout
	cfg.ConnConfig.RuntimeParams["application_name"] = "hookgate-migrate"
	mpool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(mpool.Close)
	done := make(chan error, 1)
	go func() {
		_, err := migrate.Up(ctx, mpool, slog.New(slog.DiscardHandler))
		done <- err
	}()

	var ended error
	endedEarly := false
	require.Eventually(t, func() bool {
		select {
		case ended = <-done:
			endedEarly = true
			return true
		default:
		}
		var waited float64
		err := pool.QueryRow(ctx, `
SELECT coalesce(max(extract(epoch FROM now() - l.waitstart)), 0)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = 'hookgate-migrate' AND a.datname = current_database()
  AND NOT l.granted AND l.relation = $1::regclass`, table).Scan(&waited)
		return err == nil && waited > wait.Seconds()
	}, wait+time.Minute, 20*time.Millisecond, "the migration waits behind the holder of %s", table)
	require.False(t, endedEarly, "the migration ended while the holder still held %s: %v", table, ended)
	return pool, hold, done
}

// Migration 16 waits out a SHARE UPDATE EXCLUSIVE holder of either table
// it changes (what an autovacuum holds until Postgres cancels it, after
// deadlock_timeout: a second by default) for longer than the session's
// lock_timeout, since that wait holds no writer up, and then applies. Run
// with the half-second lock_timeout docs/operations.md gives migrate, it
// failed with a lock timeout whenever an autovacuum held a table for more
// than half a second. Writers are not held up while it waits.
func TestHistoryCascadeWaitsOutVacuumNotWriters(t *testing.T) {
	t.Parallel()
	const lockTimeout = 500 * time.Millisecond
	for _, table := range []string{"webhook_event_claims", "webhook_attempts"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// The migration waits behind the holder for twice its
			// lock_timeout, and a writer of every table it changes gets its
			// locks meanwhile, within a fifth of a second.
			pool, hold, done := migrationBehindHolder(t, table, lockTimeout.String(), 2*lockTimeout)
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				for _, q := range []string{
					`SET LOCAL lock_timeout = '200ms'`,
					`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, completed_at)
VALUES ('sw', 'evt_during', 'order.paid', 'completed', '\x7b7d', now())`,
					`INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
VALUES ('sw', 'evt_during', 'fulfil', 'completed', now())`,
					`INSERT INTO webhook_attempts (provider, event_id, route, attempt, started_at, duration_ms, status_code)
VALUES ('sw', 'evt_during', 'fulfil', 1, now(), 3, 200)`,
				} {
					if _, err := tx.Exec(ctx, q); err != nil {
						return err
					}
				}
				return nil
			}), "a writer is not held up by the waiting migration")
			select {
			case err := <-done:
				t.Fatalf("the migration ended while the holder still held %s: %v", table, err)
			default:
			}

			require.NoError(t, hold.Commit(ctx))
			require.NoError(t, <-done, "the migration applies once the holder is gone")
			var key, trigger bool
			require.NoError(t, pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'webhook_attempts_provider_event_id_route_fkey'),
       EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'webhook_attempts_delete_with_claims')`).Scan(&key, &trigger))
			require.False(t, key, "the history's key is dropped")
			require.True(t, trigger, "the history leaves with its claims")
		})
	}
}

// Migration 16's minute behind a SHARE UPDATE EXCLUSIVE holder is a least,
// not a cap: a session whose lock_timeout is longer, or 0 (no limit, which
// is Postgres' default and what an operator who sets none runs with), keeps
// waiting as it asked. An autovacuum to prevent wraparound is not cancelled
// for a lock request, and can hold a large table for longer than a minute;
// with the minute as a cap, a migrate run with no lock_timeout failed
// behind it where it had waited before.
func TestHistoryCascadeKeepsALongerLockTimeout(t *testing.T) {
	t.Parallel()
	const minute = time.Minute // the least migration 16 waits behind the holder
	for _, table := range []string{"webhook_event_claims", "webhook_attempts"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, hold, done := migrationBehindHolder(t, table, "0", minute+3*time.Second)
			require.NoError(t, hold.Commit(ctx))
			require.NoError(t, <-done, "the migration applies once the holder is gone")
			var trigger bool
			require.NoError(t, pool.QueryRow(ctx,
				`SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'webhook_attempts_delete_with_claims')`).Scan(&trigger))
			require.True(t, trigger, "the history leaves with its claims")
		})
	}
}
