package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestRetryStatuses runs two routes whose downstream answers 404 twice,
// then 200, as n8n does while it re-registers its webhooks after a start:
// the route with retry_statuses: [404] retries with its backoff and is
// completed on the third attempt; the route without it fails on the first.
func TestRetryStatuses(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "starting", events: []string{"starting"}, extra: "    retry_statuses: [404]\n"},
		{name: "plain", events: []string{"plain"}},
	})
	for _, r := range []string{"starting", "plain"} {
		s.down.set(r, answers(http.StatusNotFound, http.StatusNotFound, http.StatusOK))
	}
	ingest, _ := s.ingest(), s.worker()
	s.claimed(ingest, event{id: "evt_starting", typ: "starting"})
	s.claimed(ingest, event{id: "evt_plain", typ: "plain"})

	t.Run("ListedStatusIsRetriedUntilSuccess", func(t *testing.T) {
		c, ds := s.waitStatus("evt_starting", claim.Completed, settle)
		d := deliveryOf(t, ds, "starting")
		require.Equal(t, 3, d.AttemptCount)
		require.Equal(t, 3, c.AttemptCount)
		k := key("evt_starting", "starting")
		require.Equal(t, []string{"1", "2", "3"}, s.down.attempts(k))
		require.Equal(t, 1, s.down.effectsOf(k))
	})

	t.Run("WithoutItTheStatusFailsAtOnce", func(t *testing.T) {
		_, ds := s.waitStatus("evt_plain", claim.Failed, settle)
		d := deliveryOf(t, ds, "plain")
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, "HTTP 404 Not Found", d.LastError)
		require.Len(t, s.down.callsFor(key("evt_plain", "plain")), 1)
	})

	t.Run("RoutesListShowsThem", func(t *testing.T) {
		out, code := s.run("routes", "list", "--json")
		require.Zero(t, code, out)
		got := map[string][]int{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v struct {
				Route         string `json:"route"`
				RetryStatuses []int  `json:"retry_statuses"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &v), out)
			got[v.Route] = v.RetryStatuses
		}
		require.Equal(t, map[string][]int{"starting": {404}, "plain": {}}, got)

		out, code = s.run("routes", "list")
		require.Zero(t, code, out)
		require.Regexp(t, `(?m)^starting\s.*\sroute-starting\s+404$`, out)
		require.Regexp(t, `(?m)^plain\s.*\sroute-plain\s+-$`, out)
	})
}
