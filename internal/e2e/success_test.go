package e2e_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestSuccessPredicate runs the real binaries against a downstream that
// answers like n8n: a route whose success program reads the body retries
// n8n's "starting up" 200s and completes on the answer that says ok; one
// whose downstream says {"ok":false} forever fails after max_attempts,
// every attempt's history row keeping its 200 and the reason naming no
// body text; a route without success completes on any 2xx, as before.
func TestSuccessPredicate(t *testing.T) {
	t.Parallel()
	const success = "    success: '.body.ok == true'\n"
	s := newStack(t, []route{
		{name: "starting", events: []string{"starting"}, extra: success},
		{name: "notok", events: []string{"notok"}, maxAttempts: 3, extra: success},
		{name: "plain", events: []string{"plain"}},
	})
	s.down.answer("starting", func(n int) (int, string, string) {
		if n <= 2 {
			return http.StatusOK, "text/html; charset=utf-8", "n8n is starting up. Please wait"
		}
		return http.StatusOK, "application/json", `{"ok":true}`
	})
	s.down.answer("notok", func(int) (int, string, string) {
		return http.StatusOK, "application/json", `{"ok":false,"secret":"do-not-store"}`
	})
	s.down.answer("plain", func(int) (int, string, string) { return http.StatusOK, "application/json", `{"ok":false}` })
	ingest, _ := s.ingest(), s.worker()
	for _, typ := range []string{"starting", "notok", "plain"} {
		s.claimed(ingest, event{id: "evt_" + typ, typ: typ})
	}
	history := func(id, route string) []claim.AttemptRecord {
		t.Helper()
		as, err := s.store.Attempts(context.Background(), provider, id, true)
		require.NoError(t, err)
		return as[route]
	}

	t.Run("StartingUpIsRetriedThenCompleted", func(t *testing.T) {
		_, ds := s.waitStatus("evt_starting", claim.Completed, settle)
		d := deliveryOf(t, ds, "starting")
		require.Equal(t, 3, d.AttemptCount)
		k := key("evt_starting", "starting")
		require.Equal(t, []string{"1", "2", "3"}, s.down.attempts(k))
		h := history("evt_starting", "starting")
		require.Len(t, h, 3)
		for i, a := range h {
			require.NotNil(t, a.StatusCode)
			require.Equal(t, http.StatusOK, *a.StatusCode, "the history keeps the status code")
			if i < 2 {
				require.Equal(t, "answer did not satisfy success", *a.Error)
			} else {
				require.Nil(t, a.Error)
			}
		}
	})

	t.Run("NotOKFailsAfterMaxAttempts", func(t *testing.T) {
		_, ds := s.waitStatus("evt_notok", claim.Failed, settle)
		d := deliveryOf(t, ds, "notok")
		require.Equal(t, 3, d.AttemptCount)
		require.Contains(t, d.LastError, "answer did not satisfy success")
		require.NotContains(t, d.LastError, "do-not-store")
		require.NotContains(t, d.LastError, "ok")
		require.Equal(t, []string{"1", "2", "3"}, s.down.attempts(key("evt_notok", "notok")))
		h := history("evt_notok", "notok")
		require.Len(t, h, 3)
		for _, a := range h {
			require.Equal(t, http.StatusOK, *a.StatusCode)
			require.Contains(t, *a.Error, "answer did not satisfy success")
			require.NotContains(t, *a.Error, "do-not-store")
		}
	})

	t.Run("WithoutSuccessAny2xxCompletes", func(t *testing.T) {
		_, ds := s.waitStatus("evt_plain", claim.Completed, settle)
		require.Equal(t, 1, deliveryOf(t, ds, "plain").AttemptCount)
		require.Len(t, s.down.callsFor(key("evt_plain", "plain")), 1)
	})
}
