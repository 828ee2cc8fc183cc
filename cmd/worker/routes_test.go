package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/operator"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestRoutesCommands runs the routes commands with only DATABASE_URL and
// the config file, as operators would where secrets are not at hand.
func TestRoutesCommands(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cfgPath := writeConfig(t, "http://127.0.0.1:1")
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfgPath})
	store := newStore(t, db)
	for _, id := range []string{"evt_1", "evt_2"} {
		claimEvent(t, store, id, `{}`)
	}
	// One more event whose ship delivery waits for a route that runs first.
	_, err := testfactory.ClaimEvent(t.Context(), store, claim.Event{Provider: "stripe", ID: "evt_3", Type: "invoice.paid", Payload: []byte(`{}`),
		After: map[string][]string{"ship": {"first"}}}, []string{"first", "ship"}, true)
	require.NoError(t, err)
	routes := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, run(t.Context(), append([]string{"worker", "routes"}, args...), env, &out, io.Discard))
		return out.String()
	}

	lines := strings.Split(strings.TrimSpace(routes("list")), "\n")
	require.Len(t, lines, 2, lines)
	require.Regexp(t, `^ROUTE\s+STATE\s+BREAKER\s+CONCURRENCY\s+PROCESSING\s+WAITING\s+FAILED\s+BACKLOG\s+RETRYING\s+RUNNING\s+QUEUE\s+RETRY_STATUSES$`, lines[0])
	require.Regexp(t, `^ship\s+active\s+closed\s+4\s+2\s+1\s+0\s+2\s+0\s+0\s+route-ship\s+-$`, lines[1])

	// The config file may be named before the subcommand, too.
	noConfigEnv := getenv(map[string]string{"DATABASE_URL": db.URL})
	for _, args := range [][]string{
		{"worker", "--config", cfgPath, "routes", "list"},
		{"worker", "routes", "--config", cfgPath, "list"},
		{"worker", "routes", "list", "--config", cfgPath},
	} {
		var again bytes.Buffer
		require.NoError(t, run(t.Context(), args, noConfigEnv, &again, io.Discard), args)
		require.Equal(t, strings.Join(lines, "\n")+"\n", again.String(), args)
	}

	require.Equal(t, "paused route ship (queue route-ship): every worker finishes the attempts in flight and starts no new ones; ingest keeps accepting and queueing its events\n",
		routes("pause", "ship"))
	require.Regexp(t, `(?m)^ship\s+paused since \S+\s+closed\s+4\s+2\s+1\s+0\s+2\s`, routes("list"))
	var v struct {
		Route       string `json:"route"`
		Queue       string `json:"queue"`
		Concurrency int    `json:"concurrency"`
		Processing  int    `json:"processing"`
		Waiting     int    `json:"waiting"`
		Failed      int    `json:"failed"`
		Backlog     int    `json:"backlog"`
		Available   int    `json:"available"`
		Paused      bool   `json:"paused"`
		PausedAt    string `json:"paused_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(routes("list", "--json")), &v))
	require.Equal(t, "ship", v.Route)
	require.Equal(t, "route-ship", v.Queue)
	require.Equal(t, 4, v.Concurrency, "worker.concurrency, as the route sets none")
	require.Equal(t, 2, v.Processing)
	require.Equal(t, 1, v.Waiting)
	require.Equal(t, 2, v.Backlog)
	require.Equal(t, 2, v.Available)
	require.True(t, v.Paused)
	require.NotEmpty(t, v.PausedAt)

	require.Equal(t, "resumed route ship (queue route-ship): workers take its queued deliveries again\n", routes("resume", "ship"))
	require.Equal(t, "route ship was not paused\n", routes("resume", "ship"))
	require.Regexp(t, `(?m)^ship\s+active\s`, routes("list"))

	// Closing the circuit by hand: open, it closes; closed, nothing changes.
	_, err = store.BreakerApply(t.Context(), "ship", claim.BreakerFailed, claim.BreakerSettings{Failures: 1, CoolDown: time.Hour,
		MaxCoolDown: time.Hour}, nil)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ship\s+active\s+open \(probe at \S+\)\s`, routes("list"))
	require.Equal(t, "closed the circuit of route ship: workers send its waiting deliveries again\n", routes("close-breaker", "ship"))
	require.Regexp(t, `(?m)^ship\s+active\s+closed\s`, routes("list"))
	require.Equal(t, "the circuit of route ship was closed already\n", routes("close-breaker", "ship"))

	// Each action is audited under the OS user who ran it; listing is not.
	entries, err := claim.NewStore(db.Pool, nil, nil).AuditRows(t.Context(), claim.AuditFilter{}, 10, nil)
	require.NoError(t, err)
	require.Len(t, entries, 6)
	require.Equal(t, claim.ActorBreaker, entries[2].Actor, "the breaker's own opening")
	require.Empty(t, entries[2].Origin)
	for i, want := range []string{claim.ActionBreakerClose, claim.ActionBreakerClose} {
		require.Equal(t, want, entries[i].Action)
		require.Equal(t, operator.CLIActor(), entries[i].Actor)
		require.Equal(t, claim.OriginCLI, entries[i].Origin, "closed by hand from the CLI")
	}
	entries = entries[3:]
	for i, want := range []string{operator.ActionResume, operator.ActionResume, operator.ActionPause} {
		require.Equal(t, want, entries[i].Action)
		require.Equal(t, operator.CLIActor(), entries[i].Actor)
		require.Equal(t, "ship", entries[i].Target)
	}
	require.Regexp(t, `^cli:.+`, operator.CLIActor())
}

// TestClaimsRetryAudited retries one claim and then every failed claim from
// the CLI: each is an audit row naming the OS user.
func TestClaimsRetryAudited(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": writeConfig(t, "http://127.0.0.1:1")})
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{EventID: id, Status: claim.Failed,
			Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryFailed, LastError: "500"}}})
	}
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "retry", "stripe", "evt_2"}, env, &out, io.Discard))
	require.Equal(t, "stripe/evt_2: reopened 1 delivery; 1 job queued\n", out.String())
	out.Reset()
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "retry", "--status", "failed"}, env, &out, io.Discard))
	require.Contains(t, out.String(), "reopened 2 deliveries of 2 failed claims\n")
	err := run(t.Context(), []string{"worker", "claims", "retry", "stripe", "evt_1"}, env, io.Discard, io.Discard)
	require.ErrorContains(t, err, "stripe/evt_1 is still processing", "refused: no audit row")

	entries, err := claim.NewStore(db.Pool, nil, nil).AuditRows(t.Context(), claim.AuditFilter{}, 10, nil)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, operator.ActionBulkRetry, entries[0].Action)
	require.JSONEq(t, `{"filters":{"status":"failed"},"force":false,"matched":2,"reopened":2,"deliveries":2}`, string(entries[0].Detail))
	require.Equal(t, operator.ActionRetry, entries[1].Action)
	require.Equal(t, "stripe/evt_2", entries[1].Target)
	for _, e := range entries {
		require.Equal(t, operator.CLIActor(), e.Actor)
		require.Equal(t, claim.OriginCLI, e.Origin)
	}
}

func TestRoutesErrors(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": writeConfig(t, "http://127.0.0.1:1")})
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NoCommand", nil, "routes needs a command: list, pause, resume or close-breaker"},
		{"UnknownCommand", []string{"drain"}, `unknown routes command "drain": want list, pause, resume or close-breaker`},
		{"PauseUnknownRoute", []string{"pause", "shipp"}, `no route "shipp" in the configuration (routes: ship)`},
		{"ResumeUnknownRoute", []string{"resume", "mail"}, `no route "mail" in the configuration (routes: ship)`},
		{"PauseNeedsName", []string{"pause"}, "routes pause takes one route NAME"},
		{"ResumeOneName", []string{"resume", "ship", "mail"}, "routes resume takes one route NAME"},
		{"ListNoArguments", []string{"list", "ship"}, `unexpected argument "ship"`},
		{"ListenAfterRoutes", []string{"--listen", "127.0.0.1:0", "list"}, "flag provided but not defined: -listen"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := run(t.Context(), append([]string{"worker", "routes"}, tt.args...), env, io.Discard, io.Discard)
			require.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("ListenIsForServing", func(t *testing.T) {
		t.Parallel()
		err := run(t.Context(), []string{"worker", "--listen", "127.0.0.1:0", "routes", "list"}, env, io.Discard, io.Discard)
		require.ErrorContains(t, err, "--listen applies only when serving, not to routes")
	})
}
