package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// migratedTo creates an empty database with hookgate's migrations applied
// up to version (River's not at all), and returns its URL and a pool on it.
func migratedTo(t *testing.T, version int64) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	url := dbtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, version)
	require.NoError(t, err)
	return url, pool
}
