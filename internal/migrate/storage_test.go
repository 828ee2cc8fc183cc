package migrate_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/migrate"
)

// The storage parameters migration (00020) leaves autovacuum's thresholds
// set on the tables a day of traffic grows, River's job table among them,
// and running the migrations again changes nothing.
func TestStorageParameters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for range 2 {
		_, err = migrate.Up(ctx, pool, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
	}

	vacuum := []string{"autovacuum_vacuum_scale_factor=0.01", "autovacuum_analyze_scale_factor=0.01"}
	want := map[string][]string{
		"webhook_event_claims": append([]string{"autovacuum_vacuum_insert_scale_factor=0.01"}, vacuum...),
		"webhook_deliveries":   append([]string{"autovacuum_vacuum_insert_scale_factor=0.01"}, vacuum...),
		"webhook_attempts":     append([]string{"autovacuum_vacuum_insert_scale_factor=0.01"}, vacuum...),
		"river_job":            {"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_threshold=1000", "autovacuum_analyze_scale_factor=0.05"},
	}
	for table, opts := range want {
		var got []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, table).Scan(&got))
		require.ElementsMatch(t, opts, got, "storage parameters of %s", table)
	}
}
