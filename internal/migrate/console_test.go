package migrate_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/migrate"
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
