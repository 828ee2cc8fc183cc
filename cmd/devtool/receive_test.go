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

// POST /demo/fail makes every delivery a 503 with no effect until the
// window ends or DELETE /demo/fail stops it; a bad window is a 400.
func TestReceiverFailsOnPurpose(t *testing.T) {
	t.Parallel()

	var out proctest.Buffer
	rcv := newReceiver(&out)
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	rcv.now = func() time.Time { return now }
	srv := httptest.NewServer(rcv.routes())
	t.Cleanup(srv.Close)

	do := func(method, path, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	for _, bad := range []string{"", "?for=0s", "?for=-1s", "?for=11m", "?for=soon"} {
		code, body := do(http.MethodPost, "/demo/fail"+bad, "")
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Contains(t, body, "for must be a duration from 1s to 10m0s")
	}
	code, body := do(http.MethodPost, "/demo/fail?for=90s", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"failing_until":"2026-01-02T15:05:35Z"}`, body)

	code, body = do(http.MethodPost, "/hooks/demo", "k1")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"ok":false,"error":"the demo receiver is failing on purpose"}`, body)
	effects, _ := rcv.counts()
	require.Zero(t, effects, "a 503 is no effect")
	require.Contains(t, out.String(), "-> 503, failing on purpose until 15:05:35 (no effect)")

	now = now.Add(91 * time.Second) // the window has ended
	code, _ = do(http.MethodPost, "/hooks/demo", "k1")
	require.Equal(t, http.StatusOK, code)

	code, _ = do(http.MethodPost, "/demo/fail?for=1m", "")
	require.Equal(t, http.StatusOK, code)
	code, body = do(http.MethodDelete, "/demo/fail", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"failing_until":null}`, body)
	code, _ = do(http.MethodPost, "/hooks/demo", "k2")
	require.Equal(t, http.StatusOK, code)
	effects, _ = rcv.counts()
	require.Equal(t, 2, effects)
}
