package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/devlocal"
	"github.com/hookgate/hookgate/internal/proctest"
)

// ingestStub stands in for ingest: it verifies each request with the
// official Standard Webhooks library and answers as ingest does, the first
// request for an id received and every later one a duplicate.
type ingestStub struct {
	wh *standardwebhooks.Webhook

	mu       sync.Mutex
	requests []stubRequest
}

type stubRequest struct {
	path   string
	header http.Header
	body   []byte
	err    error // what the library's Verify said
}

func (s *ingestStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	err := s.wh.Verify(body, r.Header)
	s.mu.Lock()
	s.requests = append(s.requests, stubRequest{path: r.URL.Path, header: r.Header.Clone(), body: body, err: err})
	dup := len(s.requests) > 1
	s.mu.Unlock()
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"error":"signature does not match any configured secret"}`)
		return
	}
	fmt.Fprintf(w, "{\"received\":true,\"duplicate\":%t}\n", dup)
}

func TestSend(t *testing.T) {
	t.Parallel()

	ownSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-secret-only-this-test-knows-32"))
	tests := []struct {
		name     string
		envValue string // DEMO_WEBHOOK_SECRET; "" leaves it unset
		verifyBy string // the secret the stub verifies with
		args     []string
		wantN    int
		wantErr  string
	}{
		{name: "demo secret, twice by default", verifyBy: demoWebhookSecret, wantN: 2},
		{name: "secret from the environment", envValue: ownSecret, verifyBy: ownSecret, args: []string{"--times", "3"}, wantN: 3},
		{name: "once", verifyBy: demoWebhookSecret, args: []string{"--times", "1"}, wantN: 1},
		{name: "secrets differ", envValue: ownSecret, verifyBy: demoWebhookSecret, wantN: 2, wantErr: "2 of 2 posts were not accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wh, err := standardwebhooks.NewWebhook(tt.verifyBy)
			require.NoError(t, err)
			stub := &ingestStub{wh: wh}
			srv := httptest.NewServer(stub)
			t.Cleanup(srv.Close)

			var out bytes.Buffer
			args := append([]string{"devtool", "send", "--url", srv.URL + "/webhooks/demo", "--id", "evt_test_1", "--type", "invoice.paid"}, tt.args...)
			getenv := func(name string) string {
				if name == "DEMO_WEBHOOK_SECRET" {
					return tt.envValue
				}
				return ""
			}
			err = run(context.Background(), args, getenv, &out, &out)

			stub.mu.Lock()
			defer stub.mu.Unlock()
			require.Len(t, stub.requests, tt.wantN)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Contains(t, out.String(), "must see the same DEMO_WEBHOOK_SECRET")
				return
			}
			require.NoError(t, err)

			first := stub.requests[0]
			for i, r := range stub.requests {
				require.NoError(t, r.err, "request %d", i+1)
				require.Equal(t, "/webhooks/demo", r.path)
				// Signed once: every request is the same bytes and headers.
				require.Equal(t, first.body, r.body)
				for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
					require.Equal(t, first.header.Get(h), r.header.Get(h), h)
				}
				dup := i > 0
				require.Equal(t, fmt.Sprintf(`%d/%d 200 {"received":true,"duplicate":%t}`, i+1, tt.wantN, dup), lines[i+1])
			}
			require.Equal(t, "evt_test_1", first.header.Get("webhook-id"))
			require.Equal(t, "application/json", first.header.Get("Content-Type"))

			var ev devlocal.DemoEvent
			require.NoError(t, json.Unmarshal(first.body, &ev))
			require.Equal(t, "evt_test_1", ev.ID)
			require.Equal(t, "invoice.paid", ev.Type)
			require.Equal(t, "invoice", ev.Data.Object)
			require.True(t, strings.HasPrefix(ev.Data.ID, "in_"))
			require.Positive(t, ev.Data.Amount)
		})
	}
}

func TestSendRandomID(t *testing.T) {
	t.Parallel()

	wh, err := standardwebhooks.NewWebhook(demoWebhookSecret)
	require.NoError(t, err)
	stub := &ingestStub{wh: wh}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)

	for range 2 {
		var out bytes.Buffer
		err := run(context.Background(), []string{"devtool", "send", "--url", srv.URL, "--times", "1"}, func(string) string { return "" }, &out, &out)
		require.NoError(t, err)
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	a, b := stub.requests[0].header.Get("webhook-id"), stub.requests[1].header.Get("webhook-id")
	require.Regexp(t, `^evt_[0-9a-f]{16}$`, a)
	require.NotEqual(t, a, b)
}

func TestSendUnreachable(t *testing.T) {
	t.Parallel()

	// A port that was free a moment ago: nothing listens on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	var out bytes.Buffer
	err = run(context.Background(), []string{"devtool", "send", "--url", "http://" + addr + "/webhooks/demo"}, func(string) string { return "" }, &out, &out)
	require.ErrorContains(t, err, "ingest is not reachable at http://"+addr)
	require.ErrorContains(t, err, "make run")
	require.Equal(t, 1, exitCode(err, &out))
}

// `send --fail N` makes the demo receiver answer 503 first, then sends N
// events, each with an id of its own; the receiver, failing, records no
// effect until the window ends.
func TestSendFail(t *testing.T) {
	t.Parallel()

	wh, err := standardwebhooks.NewWebhook(demoWebhookSecret)
	require.NoError(t, err)
	stub := &ingestStub{wh: wh}
	ingestSrv := httptest.NewServer(stub)
	t.Cleanup(ingestSrv.Close)
	var rcvOut proctest.Buffer
	rcv := newReceiver(&rcvOut)
	rcvSrv := httptest.NewServer(rcv.routes())
	t.Cleanup(rcvSrv.Close)

	var out bytes.Buffer
	err = run(context.Background(), []string{"devtool", "send", "--url", ingestSrv.URL + "/webhooks/demo", "--times", "1",
		"--fail", "3", "--fail-for", "2m", "--receiver", rcvSrv.URL}, func(string) string { return "" }, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "the demo receiver answers 503 until ")
	require.Contains(t, out.String(), "its circuit opens")

	stub.mu.Lock()
	ids := map[string]bool{}
	for _, r := range stub.requests {
		require.NoError(t, r.err)
		ids[r.header.Get("webhook-id")] = true
	}
	stub.mu.Unlock()
	require.Len(t, ids, 3, "three events, each its own id")

	rcv.mu.Lock()
	until := rcv.failUntil
	rcv.mu.Unlock()
	require.WithinDuration(t, time.Now().Add(2*time.Minute), until, time.Minute, "failing for --fail-for")

	for _, bad := range [][]string{{"--fail", "-1"}, {"--fail", "101"}, {"--fail", "2", "--id", "evt_x"}} {
		err := run(context.Background(), append([]string{"devtool", "send", "--url", ingestSrv.URL, "--receiver", rcvSrv.URL}, bad...), func(string) string { return "" }, &out, &out)
		require.Error(t, err, bad)
	}

	// No receiver: said plainly, and nothing is sent.
	rcvSrv.Close()
	stub.mu.Lock()
	before := len(stub.requests)
	stub.mu.Unlock()
	err = run(context.Background(), []string{"devtool", "send", "--url", ingestSrv.URL, "--fail", "1", "--receiver", rcvSrv.URL}, func(string) string { return "" }, &out, &out)
	require.ErrorContains(t, err, "the demo receiver is not reachable at "+rcvSrv.URL)
	stub.mu.Lock()
	require.Len(t, stub.requests, before)
	stub.mu.Unlock()
}
