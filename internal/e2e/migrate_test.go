package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

const upToDate = "database schema is up to date; nothing to apply\n"

// TestMigrateProcessesAtOnce starts four `migrate` processes, of both
// binaries, at once on an empty database: all succeed, exactly one applies
// the migrations, the schema is whole, and another run changes nothing.
func TestMigrateProcessesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmptyDB(t)

	cmds := make([]*exec.Cmd, 4)
	outs := make([]bytes.Buffer, 4)
	for i := range cmds {
		bin := []string{bins.ingest, bins.worker}[i%2]
		cmds[i] = exec.Command(bin, "migrate")
		cmds[i].Env = append(os.Environ(), "DATABASE_URL="+url)
		cmds[i].Stdout = &outs[i]
		require.NoError(t, cmds[i].Start())
	}
	applied := 0
	for i, c := range cmds {
		require.NoError(t, c.Wait(), "migrate process %d", i)
		if strings.HasPrefix(outs[i].String(), "applied") {
			applied++
		} else {
			require.Equal(t, upToDate, outs[i].String())
		}
	}
	require.Equal(t, 1, applied, "exactly one process applied the migrations")

	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer db.Close(ctx)
	rows, err := db.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Subset(t, tables, []string{"goose_db_version", "river_job", "river_leader", "river_migration",
		"river_queue", "webhook_deliveries", "webhook_event_claims"})
	var versions int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&versions))
	entries, err := os.ReadDir("../../migrations")
	require.NoError(t, err)
	files := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			files++
		}
	}
	require.Equal(t, files, versions, "each migration recorded once")

	again := exec.Command(bins.worker, "migrate")
	again.Env = append(os.Environ(), "DATABASE_URL="+url)
	out, err := again.Output()
	require.NoError(t, err)
	require.Equal(t, upToDate, string(out))
}
