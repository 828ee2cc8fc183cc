package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// writeCellsConfig writes a configuration of two cells: eu holds stripe,
// us holds github.
func writeCellsConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
cells:
  - {name: eu, database_url_env: DB_EU}
  - {name: us, database_url_env: DB_US}
providers:
  - {name: stripe, scheme: stripe, secrets_env: [T_STRIPE]}
  - {name: github, scheme: github, secrets_env: [T_GITHUB], cell: us}
routes:
  - {name: ship, provider: stripe, events: ["*"], url: "http://127.0.0.1:1/ship"}
  - {name: mail, provider: github, events: ["*"], url: "http://127.0.0.1:1/mail"}
`), 0o600))
	return path
}

// TestClaimsListCells: `worker claims list` merges both cells newest
// first, cut to --limit, and `claims export` oldest first; with one cell unreachable it lists the other's
// claims and fails naming the cell.
func TestClaimsListCells(t *testing.T) {
	t.Parallel()
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	for i := 1; i <= 6; i++ {
		opts := &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_%d", i), FirstSeenAt: testfactory.Ago(time.Duration(i) * time.Minute)}
		db := eu
		if i%2 == 0 {
			db, opts.Provider = us, "github"
		}
		testfactory.Claim(t.Context(), t, db.Pool, opts)
	}
	vars := map[string]string{"HOOKGATE_CONFIG": writeCellsConfig(t), "DB_EU": eu.URL, "DB_US": us.URL}
	list := func(args ...string) (string, string, error) {
		var out, errs bytes.Buffer
		err := run(t.Context(), append([]string{"worker", "claims", "list"}, args...), getenv(vars), &out, &errs)
		return out.String(), errs.String(), err
	}
	ids := func(out string) []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			got = append(got, strings.Fields(line)[1])
		}
		return got
	}
	out, _, err := list("--limit", "4")
	require.NoError(t, err)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3", "evt_4"}, ids(out), out)
	out, _, err = list("--provider", "github", "--json")
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(out, `"provider":"github"`), out)

	// claims export: both cells, merged oldest first.
	var exported bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "export"}, getenv(vars), &exported, io.Discard))
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(exported.String()), "\n") {
		var c struct {
			EventID    string `json:"event_id"`
			Deliveries []any  `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &c), line)
		order = append(order, c.EventID)
	}
	require.Equal(t, []string{"evt_6", "evt_5", "evt_4", "evt_3", "evt_2", "evt_1"}, order)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	vars["DB_US"] = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", port)
	out, errs, err := list()
	require.EqualError(t, err, "cells that could not be read, whose claims are not listed: us")
	require.Equal(t, []string{"evt_1", "evt_3", "evt_5"}, ids(out), out)
	require.Contains(t, errs, "cell us cannot be read")
}

// TestClaimsRetryCells: `claims show` and `claims retry` find a claim in
// its provider's cell; `claims retry --status failed` reopens every cell's
// failed claims, audited in each cell.
func TestClaimsRetryCells(t *testing.T) {
	t.Parallel()
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	failed := func(db *dbtest.DB, provider, route, id string) {
		testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{Provider: provider, EventID: id, Status: "failed",
			Deliveries: map[string]*testfactory.DeliveryOpts{route: {Status: "failed"}}})
	}
	failed(eu, "stripe", "ship", "evt_eu")
	failed(us, "github", "mail", "evt_us_1")
	failed(us, "github", "mail", "evt_us_2")
	vars := map[string]string{"HOOKGATE_CONFIG": writeCellsConfig(t), "DB_EU": eu.URL, "DB_US": us.URL}
	worker := func(args ...string) string {
		t.Helper()
		var out, errs bytes.Buffer
		require.NoError(t, run(t.Context(), append([]string{"worker", "claims"}, args...), getenv(vars), &out, &errs), errs.String())
		return out.String()
	}
	require.Contains(t, worker("show", "github", "evt_us_1"), "mail")
	require.Contains(t, worker("retry", "github", "evt_us_1"), "github/evt_us_1: reopened 1 delivery")
	require.Contains(t, worker("retry", "--status", "failed"), "reopened 2 deliveries of 2 failed claims")
	for db, want := range map[*dbtest.DB][]string{eu: {"bulk_retry"}, us: {"retry", "bulk_retry"}} {
		rows, err := db.Pool.Query(t.Context(), `SELECT action FROM audit_log ORDER BY id`)
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			got = append(got, a)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, want, got)
		var n int
		require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE status = 'failed'`).Scan(&n))
		require.Zero(t, n)
	}
}

// TestConsoleCellsServed: a worker serving two cells answers the API's
// list from both, each read through its own read pool.
func TestConsoleCellsServed(t *testing.T) {
	t.Parallel()
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	testfactory.Claim(t.Context(), t, eu.Pool, &testfactory.ClaimOpts{EventID: "evt_eu", Status: "completed", FirstSeenAt: testfactory.Ago(time.Minute)})
	testfactory.Claim(t.Context(), t, us.Pool, &testfactory.ClaimOpts{Provider: "github", EventID: "evt_us", Status: "completed"})
	vars := map[string]string{"HOOKGATE_CONFIG": appendConfig(t, writeCellsConfig(t), consoleSection), "DB_EU": eu.URL, "DB_US": us.URL,
		"T_STRIPE": "whsec_stripe", "T_GITHUB": "github-secret", "T_ALICE": alicePassword, "T_CI": "ci-token-abcdefghijkl"}
	addr, _ := startWorker(t, vars)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/claims", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer ci-token-abcdefghijkl")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	var answer struct {
		Claims []struct {
			EventID string `json:"event_id"`
		} `json:"claims"`
	}
	require.NoError(t, json.Unmarshal(raw, &answer))
	require.Len(t, answer.Claims, 2, string(raw))
	require.Equal(t, "evt_us", answer.Claims[0].EventID)
	require.Equal(t, "evt_eu", answer.Claims[1].EventID)
	require.NotContains(t, string(raw), "unavailable_cells")
}

// TestConsoleReconcileRunsCells: the console lists each provider's runs
// from its cell, and every cell's merged newest first.
func TestConsoleReconcileRunsCells(t *testing.T) {
	t.Parallel()
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	cfg, err := config.Parse(must(os.ReadFile(writeCellsConfig(t))))
	require.NoError(t, err)
	set, err := cell.New(cfg, []cell.Pool{{Name: "eu", Pool: eu.Pool}, {Name: "us", Pool: us.Pool}},
		func(p cell.Pool) (*river.Client[pgx.Tx], error) { return claim.NewInsertClient(p.Pool, nil, 0) }, cfg.MaxAttempts)
	require.NoError(t, err)
	euStore, _ := set.Named("eu")
	usStore, _ := set.Named("us")
	for _, r := range []struct {
		c        *cell.Cell
		provider string
	}{{euStore, "stripe"}, {usStore, "github"}, {euStore, "stripe"}} {
		_, err := r.c.Store.StartReconcileRun(t.Context(), claim.ReconcileRun{Provider: r.provider, Trigger: "cli"})
		require.NoError(t, err)
	}
	c := consoleReconciler{cells: set}
	runs, err := c.Runs(t.Context(), "", 50)
	require.NoError(t, err)
	var providers []string
	for _, r := range runs {
		providers = append(providers, r.Provider)
	}
	require.Equal(t, []string{"stripe", "github", "stripe"}, providers, "newest first across cells")
	runs, err = c.Runs(t.Context(), "github", 50)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	runs, err = c.Runs(t.Context(), "", 2)
	require.NoError(t, err)
	require.Len(t, runs, 2)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
