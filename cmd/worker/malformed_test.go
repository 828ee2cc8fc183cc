package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// malformedLeak is what the malformed answers put where Go's HTTP client
// quotes it.
const malformedLeak = "LEAKME"

// rawDownstream answers each request with the raw answer whose key its
// body holds: answers Go's HTTP client cannot parse. It returns its URL.
func rawDownstream(t *testing.T, answers map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				body, _ := io.ReadAll(req.Body)
				for key, raw := range answers {
					if bytes.Contains(body, []byte(key)) {
						_, _ = c.Write([]byte(raw))
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A downstream answering a malformed status line, a header without a
// colon, or a bad Content-Length (each quoting text of its own) leaves a
// fixed reason in last_error, the attempts' error as a viewer and an
// operator read them (API and console), and the worker's log: never a
// byte of what it sent.
func TestMalformedAnswersReachNoViewer(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	cases := map[string]struct{ raw, reason string }{
		"evt_status": {"HTTP/1.1 2x9" + malformedLeak + " OK\r\nContent-Length: 0\r\n\r\n", "bad status code"},
		"evt_header": {"HTTP/1.1 200 OK\r\nX-Card " + malformedLeak + "\r\nContent-Length: 0\r\n\r\n", "bad header"},
		"evt_length": {"HTTP/1.1 503 Busy\r\nContent-Length: 9" + malformedLeak + "\r\n\r\n", "bad Content-Length"},
	}
	answers := map[string]string{}
	for id, c := range cases {
		answers[id] = c.raw
	}
	cfg := appendConfig(t, writeConfig(t, rawDownstream(t, answers)), `console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
    - name: bob
      role: viewer
      password_env: T_BOB
`)
	env := workerEnv(db, cfg)
	env["T_BOB"] = "bob-password-0002"
	addr, logs := startWorker(t, env)
	base := "http://" + addr

	store := newStore(t, db)
	for id := range cases {
		claimEvent(t, store, id, `{"case":"`+id+`"}`)
	}
	for id, c := range cases {
		waitStatus(t, store, id, claim.Failed, logs)
		want := "malformed response from the downstream: " + c.reason
		var lastError string
		require.NoError(t, db.Pool.QueryRow(t.Context(),
			`SELECT last_error FROM webhook_deliveries WHERE event_id = $1`, id).Scan(&lastError))
		require.True(t, strings.HasSuffix(lastError, want), "%s: %s", id, lastError)
		rows, err := db.Pool.Query(t.Context(), `SELECT error FROM webhook_attempts WHERE event_id = $1`, id)
		require.NoError(t, err)
		errs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, errs, 3, id)
		for _, e := range errs {
			require.True(t, strings.HasSuffix(e, want), "%s: %s", id, e)
		}

		for _, who := range []struct{ user, pass string }{{"bob", env["T_BOB"]}, {"alice", alicePassword}} {
			detail := apiGetAs(t, base, who.user, who.pass, "/api/v1/claims/stripe/"+id)
			require.Contains(t, detail, want+`"`, who.user)
			require.NotContains(t, detail, malformedLeak, who.user)
			for _, path := range []string{"/console/claims", "/console/claims/stripe/" + id} {
				page := pageGetAs(t, base, who.user, who.pass, path)
				require.Contains(t, page, want, who.user+" "+path)
				require.NotContains(t, page, malformedLeak, who.user+" "+path)
			}
		}
	}
	require.Contains(t, logs.String(), "malformed response from the downstream")
	require.NotContains(t, logs.String(), malformedLeak, "nor in the worker's log")
}
