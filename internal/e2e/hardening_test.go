package e2e_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

func mac(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}

// post sends body to ingest's provider with header and returns the status
// and whether it was answered as a duplicate.
func (s *stack) post(ingest *proc, provider string, header http.Header, body []byte) ack {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, ingest.url+"/webhooks/"+provider, bytes.NewReader(body))
	require.NoError(s.t, err)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var a struct {
		Duplicate bool `json:"duplicate"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return ack{status: resp.StatusCode, duplicate: a.Duplicate}
}

func githubHeader(id, event string, body []byte) http.Header {
	return http.Header{
		"Content-Type":        {"application/json"},
		"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac(githubSecret, body))},
		"X-Github-Delivery":   {id},
		"X-Github-Event":      {event},
	}
}

func shopifyHeader(id, topic string, body []byte) http.Header {
	return http.Header{
		"Content-Type":          {"application/json"},
		"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(mac(shopifySecret, body))},
		"X-Shopify-Event-Id":    {id},
		"X-Shopify-Topic":       {topic},
	}
}

// TestCapturedRequestsReplayedUnderNewIDsHaveOneEffect re-sends one captured
// GitHub and one captured Shopify request with new ids (and, for GitHub, a
// new event type that another route takes): one claim, one effect each.
func TestCapturedRequestsReplayedUnderNewIDsHaveOneEffect(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "gh-push", provider: githubProvider, events: []string{"push"}},
		{name: "gh-release", provider: githubProvider, events: []string{"release"}},
		{name: "shop-orders", provider: shopifyProvider, events: []string{"orders/*"}},
	})
	ingest, _ := s.ingest(), s.worker()

	cases := []struct {
		provider, route, id string
		header              func(id string, i int) http.Header
		body                []byte
	}{
		{githubProvider, "gh-push", "gh-orig", func(id string, i int) http.Header {
			typ := "push"
			if i%2 == 1 {
				typ = "release"
			}
			return githubHeader(id, typ, []byte(`{"ref": "refs/heads/main", "after": "c0ffee"}`))
		}, []byte(`{"ref": "refs/heads/main", "after": "c0ffee"}`)},
		{shopifyProvider, "shop-orders", "shop-orig", func(id string, _ int) http.Header {
			return shopifyHeader(id, "orders/create", []byte(`{"id": 450789469, "total_price": "598.94"}`))
		}, []byte(`{"id": 450789469, "total_price": "598.94"}`)},
	}
	for _, tc := range cases {
		require.Equal(t, ack{status: http.StatusOK}, s.post(ingest, tc.provider, tc.header(tc.id, 0), tc.body))
		for i := 1; i <= 20; i++ {
			a := s.post(ingest, tc.provider, tc.header(fmt.Sprintf("%s-forged-%d", tc.provider, i), i), tc.body)
			require.Equal(t, ack{status: http.StatusOK, duplicate: true}, a, "replay %d", i)
		}
	}
	for _, tc := range cases {
		c, _, err := s.store.Get(t.Context(), tc.provider, tc.id)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			c, _, err = s.store.Get(t.Context(), tc.provider, tc.id)
			return err == nil && c.Status == claim.Completed
		}, settle, 25*time.Millisecond)
		var claims int
		require.NoError(t, s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_event_claims WHERE provider = $1`, tc.provider).Scan(&claims))
		require.Equal(t, 1, claims, tc.provider)
		require.Equal(t, 1, s.down.effectsOf(claim.Key{Provider: tc.provider, EventID: tc.id, Route: tc.route}.IdempotencyKey()))
	}
	s.down.mu.Lock()
	defer s.down.mu.Unlock()
	require.Len(t, s.down.calls, 2, "one call per captured request, none for the replays")
}

// TestContentEncodingIsForwarded: a body signed over its gzip bytes reaches
// the downstream with the same bytes and the same Content-Encoding.
func TestContentEncodingIsForwarded(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "gh-push", provider: githubProvider, events: []string{"push"}}})
	ingest, _ := s.ingest(), s.worker()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"ref": "refs/heads/main"}`))
	require.NoError(t, zw.Close())
	body := gz.Bytes()
	h := githubHeader("gz-1", "push", body)
	h.Set("Content-Encoding", "gzip")
	require.Equal(t, ack{status: http.StatusOK}, s.post(ingest, githubProvider, h, body))
	require.Eventually(t, func() bool {
		c, _, err := s.store.Get(t.Context(), githubProvider, "gz-1")
		return err == nil && c.Status == claim.Completed
	}, settle, 25*time.Millisecond)
	calls := s.down.callsFor(claim.Key{Provider: githubProvider, EventID: "gz-1", Route: "gh-push"}.IdempotencyKey())
	require.Len(t, calls, 1)
	require.Equal(t, "gzip", calls[0].header.Get("Content-Encoding"))
	require.Equal(t, body, calls[0].body)
	require.Equal(t, "application/json", calls[0].header.Get("Content-Type"))
}

// TestOneAttemptIsOneRequest warms the worker's pool with 32 idle
// connections, then points a delivery at a downstream that reads each
// request and closes the connection without answering. Go's transport would
// replay a request carrying Idempotency-Key on each reused connection that
// fails that way; each attempt must be exactly one request.
func TestOneAttemptIsOneRequest(t *testing.T) {
	t.Parallel()
	const warm = 32
	s := newStack(t, []route{
		{name: "warm", events: []string{"warm"}},
		{name: "drop", events: []string{"drop"}, maxAttempts: 2},
	}, setting{"concurrency", "48"})

	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	s.down.set("warm", func(c *call, _ int, _ http.ResponseWriter) int {
		mu.Lock()
		if arrived++; arrived == warm {
			close(all)
		}
		mu.Unlock()
		select { // every connection is busy at once, so there are warm of them
		case <-all:
		case <-c.ctx.Done():
		}
		return http.StatusOK
	})
	s.down.set("drop", func(_ *call, _ int, w http.ResponseWriter) int {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return http.StatusBadGateway // not sent: the connection is gone
	})
	ingest, _ := s.ingest(), s.worker()

	for i := range warm {
		s.claimed(ingest, event{id: fmt.Sprintf("evt_warm%d", i), typ: "warm"})
	}
	for i := range warm {
		s.waitStatus(fmt.Sprintf("evt_warm%d", i), claim.Completed, settle)
	}

	e := event{id: "evt_drop", typ: "drop"}
	s.claimed(ingest, e)
	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, []string{"1", "2"}, s.down.attempts(key(e.id, "drop")), "one request per attempt")
	require.Equal(t, 2, deliveryOf(t, ds, "drop").AttemptCount)
}

// TestInFlightBound holds max_in_flight requests with slow 1 MiB bodies
// and sends 50 more: each extra is answered 503 with Retry-After before its
// body is sent, and ingest's memory stays within the documented bound of
// about max_in_flight × max_body_bytes.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	const (
		inFlight = 16
		maxBody  = 1 << 20
		extra    = 50
	)
	s := newStack(t, nil, setting{"ingest.max_in_flight", strconv.Itoa(inFlight)},
		setting{"ingest.max_body_bytes", strconv.Itoa(maxBody)})
	ingest := s.ingest()
	addr := strings.TrimPrefix(ingest.url, "http://")
	// One request first, so the baseline includes what any request costs.
	require.Equal(t, http.StatusUnauthorized, s.send(ingest, event{id: "evt_warm", typ: "x"}, "whsec_"+strings.Repeat("A", 43)+"=").status)
	baseline := rss(t, ingest)

	head := fmt.Sprintf("POST /webhooks/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"webhook-id: evt_slow\r\nwebhook-timestamp: %d\r\nwebhook-signature: v1,%s\r\nContent-Length: %d\r\n\r\n",
		provider, addr, time.Now().Unix(), base64.StdEncoding.EncodeToString(make([]byte, 32)), maxBody)
	held := make([]net.Conn, inFlight)
	for i := range held {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		held[i] = conn
		// All of the body but its last byte: the request stays in flight.
		_, err = conn.Write(append([]byte(head), bytes.Repeat([]byte("x"), maxBody-1)...))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return gauge(t, ingest, "hookgate_ingest_in_flight") == inFlight },
		30*time.Second, 20*time.Millisecond, "the held requests are in flight")

	for i := range extra {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = conn.Write([]byte(head)) // headers only: the body is never sent before the answer
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "extra request %d is answered without its body", i)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		require.Contains(t, string(msg), `"error"`)
	}
	require.Equal(t, float64(inFlight), gauge(t, ingest, "hookgate_ingest_in_flight"))
	grown := rss(t, ingest) - baseline
	bound := int64(inFlight*maxBody) + 16<<20 // the bodies, plus the runtime's slack
	require.Less(t, grown, bound, "RSS grew by %d MiB", grown>>20)

	for _, c := range held {
		c.Close()
	}
	require.Eventually(t, func() bool { return gauge(t, ingest, "hookgate_ingest_in_flight") == 0 },
		30*time.Second, 20*time.Millisecond, "closed requests leave")
}

// rss returns p's resident set size in bytes.
func rss(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// gauge reads an unlabelled metric from p's /metrics; -1 when absent.
func gauge(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}
