package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// A delivery answered 503 and then 201 by the real worker has two attempt
// rows, numbered as the Hookgate-Attempt headers the downstream saw: the
// 503 with its error and its (redacted) response, then the 201 without an
// error. claims show --json and claims export carry them without responses.
func TestAttemptHistoryThroughTheWorker(t *testing.T) {
	t.Parallel()
	const token = "sk_live_51AttemptEcho/Secret+Tok="
	db := dbtest.NewDB(t)
	var mu sync.Mutex
	var seen []int
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Hookgate-Attempt"))
		mu.Lock()
		seen = append(seen, n)
		first := len(seen) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "busy\nyou sent %s", r.Header.Get("Authorization"))
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"shp_1"}`)
	}))
	t.Cleanup(down.Close)
	cfgPath := appendConfig(t, writeConfig(t, down.URL), "    secret_headers: {Authorization: T_SHIP_AUTH}\n")
	env := workerEnv(db, cfgPath)
	env["T_SHIP_AUTH"] = "Bearer " + token
	worker := serveWorker(t, env)

	store := newStore(t, db)
	claimEvent(t, store, "evt_1", `{}`)
	waitStatus(t, store, "evt_1", claim.Completed, worker.logs)
	worker.stop(t)

	all, err := store.Attempts(t.Context(), "stripe", "evt_1", true)
	require.NoError(t, err)
	as := all["ship"]
	require.Len(t, as, 2)
	mu.Lock()
	require.Equal(t, seen, []int{as[0].Attempt, as[1].Attempt}, "attempt numbers are the Hookgate-Attempt values sent")
	mu.Unlock()

	first, second := as[0], as[1]
	require.NotNil(t, first.StatusCode)
	require.Equal(t, http.StatusServiceUnavailable, *first.StatusCode)
	require.NotNil(t, first.Error)
	require.Contains(t, *first.Error, "HTTP 503 Service Unavailable")
	require.NotNil(t, first.Response)
	require.Equal(t, "busy\nyou sent [redacted]", *first.Response)
	require.NotNil(t, first.Request)
	require.NotNil(t, first.Request.Body)
	require.JSONEq(t, `{}`, *first.Request.Body, "the body sent is kept")
	require.NotNil(t, second.StatusCode)
	require.Equal(t, http.StatusCreated, *second.StatusCode)
	require.Nil(t, second.Error)
	require.NotNil(t, second.Response)
	require.Equal(t, `{"id":"shp_1"}`, *second.Response)
	require.False(t, second.StartedAt.Before(first.StartedAt))
	require.GreaterOrEqual(t, first.DurationMS, int64(0))

	cmdEnv := getenv(map[string]string{"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfgPath})
	var show, export, text bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1", "--json"}, cmdEnv, &show, io.Discard))
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "show", "stripe", "evt_1"}, cmdEnv, &text, io.Discard))
	require.NoError(t, run(t.Context(), []string{"worker", "claims", "export"}, cmdEnv, &export, io.Discard))
	require.Contains(t, text.String(), "attempts of ship:")
	require.Contains(t, text.String(), "HTTP 503 Service Unavailable")
	for name, out := range map[string][]byte{"claims show --json": show.Bytes(), "claims export": export.Bytes()} {
		var v struct {
			Deliveries []struct {
				Attempts []map[string]any `json:"attempts"`
			} `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal(out, &v), name)
		require.Len(t, v.Deliveries, 1, name)
		got := v.Deliveries[0].Attempts
		require.Len(t, got, 2, name)
		require.EqualValues(t, as[0].Attempt, got[0]["attempt"], name)
		require.EqualValues(t, 503, got[0]["status_code"], name)
		require.Contains(t, got[0]["error"], "HTTP 503", name)
		require.EqualValues(t, 201, got[1]["status_code"], name)
		require.Nil(t, got[1]["error"], name)
		for _, a := range got {
			require.NotContains(t, a, "response", name)
		}
		require.NotContains(t, string(out), "you sent", name, "no response")
	}
}
