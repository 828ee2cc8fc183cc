package console_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/console"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/lockout"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// cellsEnv is a console over two cells, eu (stripe, route ship) and us
// (github, route mail), each a database of its own read through its own
// read pool; e.db is eu, the first cell, where users and sessions live.
type cellsEnv struct {
	*env
	eu, us *dbtest.DB
}

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// newCellsEnv serves the console over eu and us; with usDown, us's pools
// point at a port nothing listens on, as a cell whose primary is stopped.
func newCellsEnv(t *testing.T, usDown bool) *cellsEnv {
	t.Helper()
	doc := "cells:\n  - {name: eu, database_url_env: DB_EU}\n  - {name: us, database_url_env: DB_US}\n" +
		strings.Replace(cfgDoc, "    secrets_env: [T_GITHUB]\n", "    secrets_env: [T_GITHUB]\n    cell: us\n", 1)
	cfg, err := config.Parse([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, "us", cfg.RouteCell("mail"))
	s, err := cfg.ResolveConsoleSecrets(func(k string) string { return secrets[k] })
	require.NoError(t, err)
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	cellOf := func(name string, pool *pgxpool.Pool) console.Cell {
		jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
		require.NoError(t, err)
		reads, err := claim.OpenReadPool(pool.Config(), claim.ReadLimits{MaxConns: 2, StatementTimeout: 5 * time.Second, WaitTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(reads.Close)
		return console.Cell{Name: name, Store: claim.NewStore(pool, jobs, cfg.MaxAttempts), Reads: reads, Queues: jobs}
	}
	usPool := us.Pool
	if usDown {
		pc, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", closedPort(t)))
		require.NoError(t, err)
		usPool, err = pgxpool.NewWithConfig(t.Context(), pc)
		require.NoError(t, err)
		t.Cleanup(usPool.Close)
	}
	cells := []console.Cell{cellOf("eu", eu.Pool), cellOf("us", usPool)}
	logs := &proctest.Buffer{}
	c := console.New(console.Options{Config: cfg, Secrets: s, Store: cells[0].Store, Reads: cells[0].Reads, Queues: cells[0].Queues,
		DB: eu.Pool, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Cells: cells,
		Guard: &lockout.Guard{Addresses: lockout.Limiter{Failures: 1000}, Names: lockout.Limiter{Failures: 1000}}})
	srv := httptest.NewServer(http.NewCrossOriginProtection().Handler(c.Handler()))
	t.Cleanup(srv.Close)
	return &cellsEnv{env: &env{db: eu, store: cells[0].Store, srv: srv, logs: logs}, eu: eu, us: us}
}

// rankedClaims makes evt_01 … evt_10, evt_01 the newest: the odd ones
// stripe's in eu, the even ones github's in us, so that the newest-first
// order alternates between the cells. Even ones, and evt_03 and evt_05,
// failed.
func rankedClaims(t *testing.T, e *cellsEnv) {
	t.Helper()
	for i := 1; i <= 10; i++ {
		opts := &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_%02d", i), Status: claim.Completed,
			FirstSeenAt: testfactory.Ago(time.Duration(i) * time.Minute)}
		db, route := e.eu, "ship"
		if i%2 == 0 {
			db, route, opts.Provider = e.us, "mail", "github"
		}
		ds := claim.DeliveryCompleted
		if i%2 == 0 || i == 3 || i == 5 {
			opts.Status, ds = claim.Failed, claim.DeliveryFailed
		}
		opts.Deliveries = map[string]*testfactory.DeliveryOpts{route: {Status: ds}}
		testfactory.Claim(t.Context(), t, db.Pool, opts)
	}
}

type cellsListAnswer struct {
	Claims []struct {
		Provider   string `json:"provider"`
		EventID    string `json:"event_id"`
		Deliveries []struct {
			Route string `json:"route"`
		} `json:"deliveries"`
	} `json:"claims"`
	Next        string   `json:"next_cursor"`
	Prev        string   `json:"prev_cursor"`
	Unavailable []string `json:"unavailable_cells"`
}

func (a cellsListAnswer) ids() []string {
	var out []string
	for _, c := range a.Claims {
		out = append(out, c.EventID)
	}
	return out
}

// TestCellsList: the API's list, search and paging merge both cells in
// one newest-first order, pages crossing from one cell to the other and
// back, each claim with its deliveries from its own cell; the console's
// list counts both cells' matches; a claim is found in its provider's
// cell; and no answer names an unavailable cell.
func TestCellsList(t *testing.T) {
	t.Parallel()
	e := newCellsEnv(t, false)
	rankedClaims(t, e)

	var pages [][]string
	var a cellsListAnswer
	path := "/api/v1/claims?limit=3"
	for {
		status, body := e.call(t, ciBot, http.MethodGet, path, nil, &a)
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, "unavailable_cells")
		pages = append(pages, a.ids())
		for _, c := range a.Claims {
			want := map[string]string{"stripe": "ship", "github": "mail"}[c.Provider]
			require.Len(t, c.Deliveries, 1, c.EventID)
			require.Equal(t, want, c.Deliveries[0].Route, "%s's deliveries from its own cell", c.EventID)
		}
		if a.Next == "" {
			break
		}
		path = "/api/v1/claims?limit=3&cursor=" + url.QueryEscape(a.Next)
	}
	require.Equal(t, [][]string{{"evt_01", "evt_02", "evt_03"}, {"evt_04", "evt_05", "evt_06"},
		{"evt_07", "evt_08", "evt_09"}, {"evt_10"}}, pages)

	// Back from the third page: the second.
	_, body := e.call(t, ciBot, http.MethodGet, "/api/v1/claims?limit=3&cursor="+url.QueryEscape(a.Prev), nil, &a)
	require.Equal(t, []string{"evt_07", "evt_08", "evt_09"}, a.ids(), body)
	_, body = e.call(t, ciBot, http.MethodGet, "/api/v1/claims?limit=3&cursor="+url.QueryEscape(a.Prev), nil, &a)
	require.Equal(t, []string{"evt_04", "evt_05", "evt_06"}, a.ids(), body)

	// Search: each cell with the same filters.
	e.call(t, ciBot, http.MethodGet, "/api/v1/claims?status=failed&limit=4", nil, &a)
	require.Equal(t, []string{"evt_02", "evt_03", "evt_04", "evt_05"}, a.ids())
	e.call(t, ciBot, http.MethodGet, "/api/v1/claims?status=failed&limit=4&cursor="+url.QueryEscape(a.Next), nil, &a)
	require.Equal(t, []string{"evt_06", "evt_08", "evt_10"}, a.ids())
	e.call(t, ciBot, http.MethodGet, "/api/v1/claims?event_id=*0*&provider=github", nil, &a)
	require.Equal(t, []string{"evt_02", "evt_04", "evt_06", "evt_08", "evt_10"}, a.ids())

	// A claim, by provider and id, from its provider's cell.
	var d struct {
		Status     claim.Status `json:"status"`
		Deliveries []struct {
			Route string `json:"route"`
		} `json:"deliveries"`
	}
	status, body := e.call(t, alice, http.MethodGet, "/api/v1/claims/github/evt_04", nil, &d)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, claim.Failed, d.Status)
	require.Equal(t, "mail", d.Deliveries[0].Route)
	status, _ = e.call(t, alice, http.MethodGet, "/api/v1/claims/stripe/evt_04", nil, nil)
	require.Equal(t, http.StatusNotFound, status, "evt_04 is github's, in us")

	// The console's list: both cells' matches counted, both cells' claims.
	page := browser(t, e.env)
	page.signIn(t, "bob", secrets["T_BOB"])
	resp, html := page.do(t, http.MethodGet, "/console/claims?status=failed&limit=4", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, html)
	require.Contains(t, html, `<span id="matched">7</span>`)
	require.Contains(t, html, "evt_02")
	require.Contains(t, html, "evt_05")
	require.NotContains(t, html, "unavailable-cells")
	resp, html = page.do(t, http.MethodGet, "/console/claims/github/evt_10", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, html)
}

// TestCellsStats: stats and the overview add up both cells.
func TestCellsStats(t *testing.T) {
	t.Parallel()
	e := newCellsEnv(t, false)
	rankedClaims(t, e)
	testfactory.Claim(t.Context(), t, e.us.Pool, &testfactory.ClaimOpts{Provider: "github", EventID: "evt_old",
		FirstSeenAt: testfactory.Ago(2 * time.Hour), Deliveries: map[string]*testfactory.DeliveryOpts{"mail": {}}})

	var st struct {
		Providers []struct {
			Provider                string         `json:"provider"`
			Claims                  map[string]int `json:"claims"`
			OldestProcessingSeconds float64        `json:"oldest_processing_seconds"`
		} `json:"providers"`
		Routes []struct {
			Route      string         `json:"route"`
			Deliveries map[string]int `json:"deliveries"`
		} `json:"routes"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/stats", nil, &st)
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "unavailable_cells")
	claims, deliveries := map[string]map[string]int{}, map[string]map[string]int{}
	for _, p := range st.Providers {
		claims[p.Provider] = p.Claims
		if p.Provider == "github" {
			require.InDelta(t, 7200, p.OldestProcessingSeconds, 60)
		}
	}
	for _, r := range st.Routes {
		deliveries[r.Route] = r.Deliveries
	}
	require.Equal(t, map[string]int{"completed": 3, "failed": 2}, claims["stripe"])
	require.Equal(t, map[string]int{"failed": 5, "processing": 1}, claims["github"])
	require.Equal(t, map[string]int{"completed": 3, "failed": 2}, deliveries["ship"])
	require.Equal(t, map[string]int{"failed": 5, "processing": 1}, deliveries["mail"])

	page := browser(t, e.env)
	page.signIn(t, "bob", secrets["T_BOB"])
	resp, html := page.do(t, http.MethodGet, "/console/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, html)
	require.Contains(t, html, `href="/console/claims?status=failed">7<`, "7 failed claims across both cells")
	require.Contains(t, html, `href="/console/claims?status=processing">1<`)
	require.Contains(t, html, "mail")
	require.Contains(t, html, "ship")
}

// TestCellsOneDown: with us unreachable, every read answers 200 with eu's
// claims, routes, stats and audit, naming us in unavailable_cells (the
// pages under a banner); a claim of us's is a 503 naming the cell. With
// one cell, no answer carries the key.
func TestCellsOneDown(t *testing.T) {
	t.Parallel()
	e := newCellsEnv(t, true)
	for i := 1; i <= 3; i++ {
		failedClaim(t, e.env, testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_%d", i)})
	}
	var a cellsListAnswer
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/claims", nil, &a)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"us"}, a.Unavailable)
	require.ElementsMatch(t, []string{"evt_1", "evt_2", "evt_3"}, a.ids())
	for _, path := range []string{"/api/v1/stats", "/api/v1/routes", "/api/v1/audit", "/api/v1/claims?event_id=*2*"} {
		var answer struct {
			Unavailable []string `json:"unavailable_cells"`
		}
		status, body := e.call(t, ciBot, http.MethodGet, path, nil, &answer)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		require.Equal(t, []string{"us"}, answer.Unavailable, path)
	}
	var routes struct {
		Routes []struct {
			Route string `json:"route"`
		} `json:"routes"`
	}
	e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &routes)
	require.Len(t, routes.Routes, 1)
	require.Equal(t, "ship", routes.Routes[0].Route, "eu's route shown, us's left out")

	status, body = e.call(t, ciBot, http.MethodGet, "/api/v1/claims/github/evt_9", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, "cell us cannot be read")
	for _, path := range []string{"/api/v1/claims/github/evt_9/retry", "/api/v1/routes/mail/pause", "/api/v1/routes/mail/breaker/close"} {
		status, body = e.call(t, alice, http.MethodPost, path, map[string]any{}, nil)
		require.Equal(t, http.StatusServiceUnavailable, status, "%s: %s", path, body)
		require.Contains(t, body, "cell us cannot be read", path)
	}
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": true}, nil)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, "cell us cannot be reached, and a bulk retry needs every cell")
	require.NotContains(t, body, "127.0.0.1", "no connection detail")

	page := browser(t, e.env)
	page.signIn(t, "bob", secrets["T_BOB"])
	for _, path := range []string{"/console/", "/console/claims", "/console/routes", "/console/audit"} {
		resp, html := page.do(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, html)
		require.Contains(t, html, `id="unavailable-cells"`, path)
		require.Contains(t, html, "<strong>us</strong>", path)
	}
	_, html := page.do(t, http.MethodGet, "/console/claims", nil)
	require.Contains(t, html, "evt_2", "eu's claims are shown")
	resp, _ := page.do(t, http.MethodGet, "/console/routes/mail/pause", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "bob is a viewer")
	alicePage := browser(t, e.env)
	alicePage.signIn(t, "alice", secrets["T_ALICE"])
	resp, html = alicePage.do(t, http.MethodGet, "/console/routes/mail/pause", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, html)
	require.Contains(t, html, "cell us cannot be read")
	require.Contains(t, e.logs.String(), "console: cell unavailable")

	one := newEnv(t, nil)
	failedClaim(t, one, testfactory.ClaimOpts{EventID: "evt_1"})
	for _, path := range []string{"/api/v1/claims", "/api/v1/stats", "/api/v1/routes", "/api/v1/audit"} {
		status, body := one.call(t, ciBot, http.MethodGet, path, nil, nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, "unavailable_cells", path)
	}
}

// auditIn returns db's audit rows of action: their targets and details.
func auditIn(t *testing.T, db *dbtest.DB, action string) []map[string]any {
	t.Helper()
	rows, err := db.Pool.Query(t.Context(), `SELECT target, detail FROM audit_log WHERE action = $1 ORDER BY id`, action)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var target string
		var detail map[string]any
		require.NoError(t, rows.Scan(&target, &detail))
		detail["target"] = target
		out = append(out, detail)
	}
	require.NoError(t, rows.Err())
	return out
}

func failedIn(t *testing.T, db *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE status = 'failed'`).Scan(&n))
	return n
}

// TestCellsActions: a bulk retry across cells counts both cells' matches
// in its dry run, refuses (409, nothing reopened in either) when they
// changed since, and reopens each cell's own, audited in each with its
// own figures; a claim's retry and a route's pause reach their provider's
// cell and are audited there; the audit lists both cells' rows, newest
// first.
func TestCellsActions(t *testing.T) {
	t.Parallel()
	e := newCellsEnv(t, false)
	ctx := t.Context()
	failed := func(db *dbtest.DB, provider, route, id string) {
		testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{Provider: provider, EventID: id, Status: claim.Failed,
			Deliveries: map[string]*testfactory.DeliveryOpts{route: {Status: claim.DeliveryFailed}}})
	}
	for i := range 2 {
		failed(e.eu, "stripe", "ship", fmt.Sprintf("evt_eu_%d", i))
	}
	for i := range 3 {
		failed(e.us, "github", "mail", fmt.Sprintf("evt_us_%d", i))
	}
	var dry bulkAnswer
	status, body := e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": true}, &dry)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, 5, dry.Matched)

	// One more failed in us since the dry run: nothing reopened anywhere.
	failed(e.us, "github", "mail", "evt_us_late")
	var changed bulkAnswer
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/retry",
		map[string]any{"dry_run": false, "matched": dry.Matched, "as_of": dry.AsOf}, nil)
	require.Equal(t, http.StatusConflict, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &changed))
	require.Equal(t, 6, changed.Matched)
	require.Equal(t, 2, failedIn(t, e.eu))
	require.Equal(t, 4, failedIn(t, e.us))
	require.Empty(t, auditIn(t, e.eu, "bulk_retry"))
	require.Empty(t, auditIn(t, e.us, "bulk_retry"))

	var done bulkAnswer
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/retry",
		map[string]any{"dry_run": false, "matched": changed.Matched, "as_of": changed.AsOf}, &done)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, 6, done.Matched)
	require.Equal(t, 6, done.Reopened)
	require.Zero(t, failedIn(t, e.eu))
	require.Zero(t, failedIn(t, e.us))
	euRows, usRows := auditIn(t, e.eu, "bulk_retry"), auditIn(t, e.us, "bulk_retry")
	require.Len(t, euRows, 1)
	require.Len(t, usRows, 1)
	require.EqualValues(t, 2, euRows[0]["reopened"])
	require.EqualValues(t, 4, usRows[0]["reopened"])

	// The console's bulk retry: both cells counted, then reopened.
	failed(e.eu, "stripe", "ship", "evt_eu_page")
	failed(e.us, "github", "mail", "evt_us_page")
	page := browser(t, e.env)
	page.signIn(t, "alice", secrets["T_ALICE"])
	resp, html := page.do(t, http.MethodGet, "/console/claims/retry?event_id=*page*", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, html)
	require.Contains(t, html, `<strong id="bulk-matched">2</strong>`)
	asOf := regexp.MustCompile(`name="as_of" value="([^"]+)"`).FindStringSubmatch(html)
	require.NotNil(t, asOf, html)
	resp, html = page.do(t, http.MethodPost, "/console/claims/retry", url.Values{"event_id": {"*page*"}, "status": {"failed"},
		"matched": {"2"}, "as_of": {asOf[1]}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, html)
	require.Contains(t, resp.Header.Get("Location"), "bulk_reopened=2")
	require.Zero(t, failedIn(t, e.eu))
	require.Zero(t, failedIn(t, e.us))
	require.Len(t, auditIn(t, e.eu, "bulk_retry"), 2)
	require.Len(t, auditIn(t, e.us, "bulk_retry"), 2)

	// A claim's retry and a route's pause, in us, audited in us.
	failed(e.us, "github", "mail", "evt_us_again")
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/claims/github/evt_us_again/retry", map[string]any{}, nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/routes/mail/pause", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, auditIn(t, e.us, "retry"), 1)
	require.Len(t, auditIn(t, e.us, "pause"), 1)
	require.Empty(t, auditIn(t, e.eu, "retry"))
	require.Empty(t, auditIn(t, e.eu, "pause"))
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/routes/ship/pause", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, auditIn(t, e.eu, "pause"), 1)
	var routes struct {
		Routes []struct {
			Route  string `json:"route"`
			Paused bool   `json:"paused"`
		} `json:"routes"`
	}
	e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &routes)
	require.Len(t, routes.Routes, 2)
	for _, r := range routes.Routes {
		require.True(t, r.Paused, r.Route)
	}

	// The audit: both cells' rows, newest first, paged across them.
	var audit struct {
		Audit []struct {
			Action string    `json:"action"`
			Target string    `json:"target"`
			At     time.Time `json:"at"`
		} `json:"audit"`
		Next string `json:"next_cursor"`
	}
	var seen []string
	path := "/api/v1/audit?limit=2"
	for {
		status, body = e.call(t, ciBot, http.MethodGet, path, nil, &audit)
		require.Equal(t, http.StatusOK, status, body)
		for _, r := range audit.Audit {
			seen = append(seen, r.Action+" "+r.Target)
		}
		if audit.Next == "" {
			break
		}
		path = "/api/v1/audit?limit=2&cursor=" + url.QueryEscape(audit.Next)
	}
	require.Equal(t, []string{"pause ship", "pause mail", "retry github/evt_us_again", "bulk_retry claims", "bulk_retry claims",
		"sign_in ", "bulk_retry claims", "bulk_retry claims"}, seen)
	require.Len(t, auditIn(t, e.eu, "sign_in"), 1, "sign-ins are audited in the first cell")
	require.Empty(t, auditIn(t, e.us, "sign_in"))
}
