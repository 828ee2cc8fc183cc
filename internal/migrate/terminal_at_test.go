package migrate_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/migrate"
)

// Claims stored before terminal_at existed get it from when they last
// changed: completed_at for completed ones, updated_at for failed and
// ignored ones; processing ones get none.
func TestTerminalAtOfExistingClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := migratedTo(t, 1)

	_, err := pool.Exec(ctx, `
INSERT INTO webhook_event_claims (provider, event_id, event_type, status, first_seen_at, updated_at, completed_at) VALUES
    ('p', 'completed',  't', 'completed',  '2026-01-01T00:00:00Z', '2026-01-03T00:00:00Z', '2026-01-02T00:00:00Z'),
    ('p', 'failed',     't', 'failed',     '2026-01-01T00:00:00Z', '2026-01-04T00:00:00Z', NULL),
    ('p', 'ignored',    't', 'ignored',    '2026-01-05T00:00:00Z', '2026-01-05T00:00:00Z', NULL),
    ('p', 'processing', 't', 'processing', '2026-01-01T00:00:00Z', '2026-01-06T00:00:00Z', NULL)`)
	require.NoError(t, err)

	_, err = migrate.Up(ctx, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	got := map[string]*time.Time{}
	rows, err := pool.Query(ctx, `SELECT event_id, terminal_at FROM webhook_event_claims`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var at *time.Time
		require.NoError(t, rows.Scan(&id, &at))
		got[id] = at
	}
	require.NoError(t, rows.Err())
	day := func(d int) *time.Time {
		t := time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC)
		return &t
	}
	require.Len(t, got, 4)
	require.Nil(t, got["processing"])
	for id, want := range map[string]*time.Time{"completed": day(2), "failed": day(4), "ignored": day(5)} {
		require.NotNil(t, got[id], id)
		require.True(t, want.Equal(*got[id]), "%s: %s", id, got[id])
	}
}
