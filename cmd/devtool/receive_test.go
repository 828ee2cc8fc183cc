package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/proctest"
)

func TestReceiver(t *testing.T) {
	t.Parallel()

	var out proctest.Buffer
	rcv := newReceiver(&out)
	rcv.now = func() time.Time { return time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC) }
	srv := httptest.NewServer(rcv.routes())
	t.Cleanup(srv.Close)

	deliver := func(path, key, attempt, body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		req.Header.Set("Hookgate-Route", "demo-receiver")
		req.Header.Set("Hookgate-Event-Id", "evt_1")
		req.Header.Set("Hookgate-Attempt", attempt)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.JSONEq(t, `{"ok":true}`, string(got))
	}
	keyA := "hg1_" + strings.Repeat("a", 64)
	deliver("/hooks/demo", keyA, "1", `{"n":1}`)
	deliver("/hooks/demo", keyA, "2", `{"n":1}`)
	deliver("/other/path", "hg1_"+strings.Repeat("b", 64), "1", `{}`)
	deliver("/hooks/demo", keyA, "3", `{"n":1}`)
	deliver("/hooks/demo", "", "1", `{}`)

	effects, repeats := rcv.counts()
	require.Equal(t, 3, effects)
	require.Equal(t, 2, repeats)

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5)
	require.Equal(t, "15:04:05 POST /hooks/demo key="+keyA+" route=demo-receiver event=evt_1 attempt=1 body=7B -> new effect", lines[0])
	require.Contains(t, lines[1], "attempt=2")
	require.Contains(t, lines[1], "-> repeat of key hg1_aaaaaaaaaaaa… (delivery 2; ignored, as a real downstream would dedupe)")
	require.Contains(t, lines[2], "/other/path")
	require.Contains(t, lines[2], "-> new effect")
	require.Contains(t, lines[3], "delivery 3; ignored")
	require.Contains(t, lines[4], "key=- ")
	require.Contains(t, lines[4], "no Idempotency-Key")

	resp, err := srv.Client().Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
