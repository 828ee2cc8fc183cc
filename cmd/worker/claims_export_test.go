package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestClaimsExport(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": writeConfig(t, "http://127.0.0.1:1")})
	store := newStore(t, db)
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		claimEvent(t, store, id, `{"id":"`+id+`"}`)
	}
	testfactory.SetClaim(t.Context(), t, db.Pool, claim.EventKey{Provider: "stripe", EventID: "evt_3"}, &testfactory.ClaimOpts{ClearPayload: true})
	export := func(args ...string) []map[string]any {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, run(t.Context(), append([]string{"worker", "claims", "export"}, args...), env, &out, io.Discard))
		var lines []map[string]any
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			var m map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
			lines = append(lines, m)
		}
		return lines
	}

	lines := export("--payloads")
	require.Len(t, lines, 3)
	for i, id := range []string{"evt_1", "evt_2", "evt_3"} {
		require.Equal(t, id, lines[i]["event_id"], "oldest first")
	}
	require.Equal(t, "eyJpZCI6ImV2dF8xIn0=", lines[0]["payload"], "the raw body, base64")
	require.NotContains(t, lines[2], "payload", "absent once cleared")
	d := lines[0]["deliveries"].([]any)[0].(map[string]any)
	require.Equal(t, "ship", d["route"])
	require.Equal(t, claim.Key{Provider: "stripe", EventID: "evt_1", Route: "ship"}.IdempotencyKey(), d["idempotency_key"])

	// The same field names as claims show --json, payload aside.
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1", "--json"}, env, &out, io.Discard))
	var shown map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
	delete(lines[0], "payload")
	require.Equal(t, slices.Sorted(maps.Keys(shown)), slices.Sorted(maps.Keys(lines[0])))
	require.Equal(t, slices.Sorted(maps.Keys(shown["deliveries"].([]any)[0].(map[string]any))), slices.Sorted(maps.Keys(d)))
	for _, k := range []string{"provider", "event_id", "event_type", "status", "first_seen_at", "attempt_count", "deliveries"} {
		require.Contains(t, lines[0], k)
	}

	require.Empty(t, export("--status", "completed"))
	require.Len(t, export("--provider", "stripe", "--since", "2000-01-01T00:00:00Z"), 3)
	require.Empty(t, export("--before", "2000-01-01T00:00:00Z"))
	require.NotContains(t, export()[0], "payload", "only with --payloads")

	for args, want := range map[string]string{
		"--since yesterday": `--since "yesterday": want an RFC 3339 time`,
		"--status done":     `--status "done": must be processing, completed, failed or ignored`,
		"--since 2026-12-02T00:00:00Z --before 2026-12-01T00:00:00Z": "is not before --before",
		"stripe": `unexpected argument "stripe"`,
	} {
		err := run(t.Context(), append([]string{"worker", "claims", "export"}, strings.Fields(args)...), env, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, args)
	}
}

// TestClaimsExportDeliveriesWithout pins how claims export writes a claim
// without deliveries (an ignored one): "deliveries":null when it is the
// first line, [] after a claim that had some, as it always has.
func TestClaimsExportDeliveriesWithout(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": writeConfig(t, "http://127.0.0.1:1")})
	ctx := t.Context()
	testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{EventID: "evt_ign_1", Status: claim.Ignored, FirstSeenAt: testfactory.Ago(3 * time.Hour)})
	testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{EventID: "evt_sent", Status: claim.Completed, FirstSeenAt: testfactory.Ago(2 * time.Hour),
		Deliveries: map[string]*testfactory.DeliveryOpts{"ship": {Status: claim.DeliveryCompleted}}})
	testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{EventID: "evt_ign_2", Status: claim.Ignored, FirstSeenAt: testfactory.Ago(time.Hour)})
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"worker", "claims", "export"}, env, &out, io.Discard))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^\{"provider":"stripe","event_id":"evt_ign_1",.*,"deliveries":null\}$`, lines[0])
	require.Regexp(t, `"deliveries":\[\{"route":"ship","status":"completed","attempt_count":0,"max_attempts":3,"idempotency_key":"hg1_[0-9a-f]{64}","updated_at":"[^"]+","completed_at":"[^"]+","attempts":\[\]\}\]\}$`, lines[1])
	require.Regexp(t, `^\{"provider":"stripe","event_id":"evt_ign_2",.*,"deliveries":\[\]\}$`, lines[2])
}
