package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestClaimsPrune(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := getenv(map[string]string{"DATABASE_URL": db.URL,
		"HOOKGATE_CONFIG": appendConfig(t, writeConfig(t, "http://127.0.0.1:1"), "retention:\n  claims: 2h\n  payloads: 1h\n  batch_size: 3\n")})
	ignored := func(id string, terminal *testfactory.When) {
		testfactory.Claim(t.Context(), t, db.Pool, &testfactory.ClaimOpts{EventID: id, Status: claim.Ignored, TerminalAt: terminal})
	}
	for i := range 7 {
		ignored(fmt.Sprintf("evt_old_%d", i+1), testfactory.Ago(3*time.Hour))
	}
	for i := range 2 {
		ignored(fmt.Sprintf("evt_mid_%d", i+1), testfactory.Ago(90*time.Minute))
	}
	ignored("evt_young", testfactory.Now())
	prune := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, run(t.Context(), append([]string{"worker", "claims", "prune"}, args...), env, &out, io.Discard))
		return out.String()
	}
	type report struct {
		Deleted         int  `json:"deleted"`
		PayloadsCleared int  `json:"payloads_cleared"`
		DryRun          bool `json:"dry_run"`
	}
	decode := func(s string) report {
		var r report
		require.NoError(t, json.Unmarshal([]byte(s), &r), s)
		return r
	}
	left := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE payload IS NOT NULL`).Scan(&n))
		return n
	}

	require.Equal(t, "would delete 7 claims (terminal for over 2h0m0s) and would clear 2 payloads (terminal for over 1h0m0s)\n",
		prune("--dry-run"))
	require.Equal(t, report{Deleted: 7, PayloadsCleared: 2, DryRun: true}, decode(prune("--dry-run", "--json")))
	require.Equal(t, 10, left(), "a dry run changes nothing")

	var shown bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_young"}, env, &shown, io.Discard))
	require.Regexp(t, `terminal:\s+20\d\d-`, shown.String(), "show says when retention ages the claim from")

	require.Equal(t, report{Deleted: 7, PayloadsCleared: 2}, decode(prune("--json")))
	require.Equal(t, 1, left())
	require.Equal(t, "deleted 0 claims (terminal for over 2h0m0s) and cleared 0 payloads (terminal for over 1h0m0s)\n", prune())

	err := run(t.Context(), []string{"worker", "claims", "prune", "now"}, env, io.Discard, io.Discard)
	require.ErrorContains(t, err, `unexpected argument "now"`)
}
