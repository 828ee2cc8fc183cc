package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

const cellsConfig = `
cells:
  - {name: eu, database_url_env: T_DB_EU}
  - {name: us, database_url_env: T_DB_US}
providers:
  - {name: stripe, scheme: stripe, secrets_env: [T_STRIPE]}
  - {name: stripe-us, scheme: stripe, secrets_env: [T_STRIPE], cell: us}
routes:
  - {name: ship, provider: stripe, events: ["invoice.*"], url: "http://127.0.0.1:1/ship"}
  - {name: ship-us, provider: stripe-us, events: ["invoice.*"], url: "http://127.0.0.1:1/ship"}
`

// TestCellsIngest: with cells:, ingest claims each provider's events in
// its cell's database, says DATABASE_URL is ignored when it is set, and
// /readyz names the cells.
func TestCellsIngest(t *testing.T) {
	t.Parallel()
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	s := startWith(t, eu.URL, cellsConfig, map[string]string{
		"T_DB_EU": eu.URL, "T_DB_US": us.URL, "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nothing",
	})
	for _, p := range []string{"stripe", "stripe-us"} {
		r := signStripe(stripeEvent("evt_cell", "invoice.paid"), stripeSecret, time.Now())
		r.provider = p
		require.Equal(t, http.StatusOK, s.post(t, r).status, p)
	}
	for db, want := range map[*dbtest.DB]string{eu: "stripe", us: "stripe-us"} {
		var providers string
		require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT string_agg(provider, ',') FROM webhook_event_claims`).Scan(&providers))
		require.Equal(t, want, providers, "the claims of %s's database", db.Name)
	}
	require.Contains(t, s.logs.String(), "DATABASE_URL is set and ignored")

	resp, err := client.Get(s.base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	require.JSONEq(t, `{"status":"ready","cells":[{"name":"eu","reachable":true},{"name":"us","reachable":true}]}`, body.String())
}

// TestCellsStartupRefused: two cells on one database stop the start with
// a message naming both keys and never the URL's password.
func TestCellsStartupRefused(t *testing.T) {
	t.Parallel()
	const url = "postgres://hookgate:s3cret-pw@db.example:5432/hookgate"
	env := testEnv("")
	env["T_DB_EU"], env["T_DB_US"] = url, url
	path := t.TempDir() + "/hookgate.yaml"
	require.NoError(t, os.WriteFile(path, []byte(cellsConfig), 0o600))
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"ingest", "--config", path}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	require.Error(t, err)
	require.Contains(t, err.Error(), "cells[1].database_url_env (T_DB_US): names the same database as cells[0].database_url_env (T_DB_EU) (db.example:5432/hookgate)")
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.NotContains(t, stderr.String(), "s3cret-pw")
	require.False(t, strings.Contains(err.Error(), "\n"), "one problem, one line")
}
