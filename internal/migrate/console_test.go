package migrate_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/migrate"
	"github.com/hookgate/hookgate/migrations"
)

// An index that an interrupted CONCURRENTLY build of migration 12 left
// INVALID is rebuilt when migrate runs again (the keyset index: later
// migrations replace some of the others).
func TestConsoleIndexesFinishAfterAnInterruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	_, pool := migratedTo(t, 12) // the later migrations come after the interrupted one

	// What an interruption leaves: the index marked invalid, the version
	// not recorded.
	for _, q := range []string{
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'webhook_event_claims_keyset_idx'::regclass`,
		`DELETE FROM goose_db_version WHERE version_id = 12`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	res, err := migrate.Up(ctx, pool, logger)
	require.NoError(t, err)
	require.NotEmpty(t, res.Hookgate)
	require.Equal(t, int64(12), res.Hookgate[0], "migration 12 runs again")
	var valid bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index
WHERE indexrelid = 'webhook_event_claims_keyset_idx'::regclass`).Scan(&valid))
	require.True(t, valid)
}

// The same for migration 26's index of the deliveries' created_at: an
// INVALID index that an interrupted CONCURRENTLY build left is dropped and
// built again when migrate runs again, and the version is recorded.
func TestDeliveryCreatedIndexFinishesAfterAnInterruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	pool, err := pgxpool.New(ctx, dbtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// River's migrations, then hookgate's up to 26 (20 sets River's
	// table's storage parameters), as a run interrupted in 26 leaves them.
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 26)
	require.NoError(t, err)
	for _, q := range []string{
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'webhook_deliveries_created_brin_idx'::regclass`,
		`DELETE FROM goose_db_version WHERE version_id = 26`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	res, err := migrate.Up(ctx, pool, logger)
	require.NoError(t, err)
	require.NotEmpty(t, res.Hookgate)
	require.Equal(t, int64(26), res.Hookgate[0], "migration 26 runs again")
	var valid bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index
WHERE indexrelid = 'webhook_deliveries_created_brin_idx'::regclass`).Scan(&valid))
	require.True(t, valid)
}
