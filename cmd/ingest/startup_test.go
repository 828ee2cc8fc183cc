package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/cli"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestStartupErrors checks that a bad start stops at once with one line
// that names the problem, and never prints a secret.
func TestStartupErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	good := write("good.yaml", testConfig)
	typo := write("typo.yaml", strings.Replace(testConfig, "max_body_bytes", "max_body_byte", 1))
	env := testEnv("postgres://127.0.0.1:1/none")

	cases := []struct {
		name   string
		args   []string
		unset  string
		want   string
		config string
	}{
		{name: "missing config file", args: []string{"--config", filepath.Join(dir, "missing.yaml")},
			want: "ingest: config file " + filepath.Join(dir, "missing.yaml") + " does not exist (set --config or HOOKGATE_CONFIG)"},
		{name: "typo'd key", args: []string{"--config", typo},
			want: `unknown key "max_body_byte" (in ingest)`},
		{name: "missing secret", args: []string{"--config", good}, unset: "T_STRIPE_OLD",
			want: "ingest: providers[0].secrets_env[1]: environment variable T_STRIPE_OLD is not set or empty"},
		{name: "no DATABASE_URL", args: []string{"--config", good}, unset: "DATABASE_URL",
			want: "ingest: DATABASE_URL is not set"},
		{name: "HOOKGATE_CONFIG names the file", config: filepath.Join(dir, "nope.yaml"),
			want: "ingest: config file " + filepath.Join(dir, "nope.yaml") + " does not exist"},
		{name: "stray argument", args: []string{"--config", good, "serve"}, want: `ingest: unknown command "serve"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == tc.unset {
					return ""
				}
				if k == "HOOKGATE_CONFIG" {
					return tc.config
				}
				return env[k]
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"ingest"}, tc.args...), getenv, &stdout, &stderr)
			require.Error(t, err)
			code := cli.Exit("ingest", err, &stderr)
			require.Equal(t, 1, code)
			out := stderr.String()
			require.Contains(t, out, tc.want)
			require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			for _, secret := range []string{stripeSecret, stripeOld, githubSecret, shopSecret, swSecret, acmeSecret} {
				require.NotContains(t, out, secret)
			}
		})
	}

	t.Run("--help shows variable names, never values", func(t *testing.T) {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"ingest", "--help"}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
		require.ErrorIs(t, err, cli.ErrHelp)
		require.Equal(t, 0, cli.Exit("ingest", err, &stderr))
		require.Contains(t, stderr.String(), "DATABASE_URL")
		require.NotContains(t, stderr.String(), stripeSecret)
	})
}

// TestMigrateConcurrently starts four migrations at once on an empty
// database: all succeed, the schema is whole, and a further run applies
// nothing and says so.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := dbtest.AdminURL(t)
	name := fmt.Sprintf("hookgate_migrate_%d", os.Getpid())
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		// A connection of its own: the one above is closed by then.
		c, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	cfg, err := pgx.ParseConfig(admin)
	require.NoError(t, err)
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": url}[k] }

	outs := make([]bytes.Buffer, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			errs[i] = run(ctx, []string{"ingest", "migrate"}, getenv, &outs[i], &bytes.Buffer{})
		})
	}
	wg.Wait()
	applied := 0
	for i := range outs {
		require.NoError(t, errs[i])
		if strings.HasPrefix(outs[i].String(), "applied") {
			applied++
		} else {
			require.Equal(t, "database schema is up to date; nothing to apply\n", outs[i].String())
		}
	}
	require.Equal(t, 1, applied, "exactly one run applied the migrations")

	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer db.Close(ctx)
	var tables []string
	rows, err := db.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	require.NoError(t, err)
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Subset(t, tables, []string{"goose_db_version", "river_job", "river_leader", "river_migration", "river_queue",
		"webhook_deliveries", "webhook_event_claims"})
	var versions int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&versions))
	entries, err := os.ReadDir("../../migrations")
	require.NoError(t, err)
	sqlFiles := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			sqlFiles++
		}
	}
	require.Equal(t, sqlFiles, versions, "each migration recorded once")

	var again bytes.Buffer
	require.NoError(t, run(ctx, []string{"ingest", "migrate"}, getenv, &again, &bytes.Buffer{}))
	require.Equal(t, "database schema is up to date; nothing to apply\n", again.String())
}

// TestGracefulShutdown: cancelling run's context (what SIGTERM does) stops
// the server cleanly and run returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.stop())
	_, err := client.Get(b.base + "/healthz")
	require.Error(t, err, "no longer listening")
}
