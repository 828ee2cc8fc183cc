package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func signHooky(id, event string, body []byte) request {
	return request{provider: "hooky", body: body, header: http.Header{
		"X-Hooky-Signature": {base64.StdEncoding.EncodeToString(hmacSHA256(acmeSecret, body))},
		"X-Hooky-Id":        {id},
		"X-Hooky-Event":     {event},
	}}
}

// TestReplayGuard re-sends captured, validly signed requests of the schemes
// whose signature does not cover the id, under new ids (and a new type):
// each is a duplicate, and only the first made a claim and jobs.
func TestReplayGuard(t *testing.T) {
	t.Parallel()
	b := setup(t)

	cases := []struct {
		provider string
		sign     func(id, typ string) request
		typ      string
	}{
		{"github", func(id, typ string) request {
			return signGitHub(id, typ, []byte(`{"ref": "refs/heads/main", "after": "9f1c"}`))
		}, "push"},
		{"shop", func(id, typ string) request {
			return signShopify(id, typ, []byte(`{"id": 820982911946154508, "total_price": "9.99"}`))
		}, "orders/create"},
		{"hooky", func(id, typ string) request {
			return signHooky(id, typ, []byte(`{"thing": "happened"}`))
		}, "thing.happened"},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			require.Equal(t, accepted, b.post(t, tc.sign("orig-1", tc.typ)).body)
			jobs := b.jobs(t)
			for i, typ := range []string{tc.typ, tc.typ, "other.type"} {
				r := b.post(t, tc.sign(fmt.Sprintf("forged-%d", i), typ))
				require.Equal(t, http.StatusOK, r.status)
				require.Equal(t, duplicate, r.body, "replay %d under a new id", i)
			}
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_event_claims WHERE provider = $1`, tc.provider))
			require.Equal(t, jobs, b.jobs(t), "no job for a replay")
			// The genuine redelivery of the original stays a plain duplicate.
			require.Equal(t, duplicate, b.post(t, tc.sign("orig-1", tc.typ)).body)
			require.Contains(t, b.metrics(t), fmt.Sprintf(`hookgate_replays_total{provider=%q} 3`, tc.provider))
		})
	}

	t.Run("off: byte-identical bodies under two ids are two events", func(t *testing.T) {
		body := []byte(`{"ref": "refs/heads/main"}`)
		for _, id := range []string{"open-1", "open-2"} {
			req := signGitHub(id, "push", body)
			req.provider = "gh-open"
			require.Equal(t, accepted, b.post(t, req).body)
		}
		require.Equal(t, 2, b.count(t, `SELECT count(*) FROM webhook_event_claims WHERE provider = 'gh-open'`))
	})

	t.Run("the guard is per provider", func(t *testing.T) {
		body := []byte(`{"same": "bytes"}`)
		require.Equal(t, accepted, b.post(t, signGitHub("per-provider", "push", body)).body)
		require.Equal(t, accepted, b.post(t, signShopify("per-provider", "orders/create", body)).body)
	})

	t.Run("deleted with the claim", func(t *testing.T) {
		body := []byte(`{"ref": "refs/heads/retained"}`)
		require.Equal(t, accepted, b.post(t, signGitHub("kept-1", "push", body)).body)
		require.Equal(t, duplicate, b.post(t, signGitHub("kept-2", "push", body)).body)
		testfactory.DeleteClaim(context.Background(), t, b.pool, claim.EventKey{Provider: "github", EventID: "kept-1"})
		require.Equal(t, accepted, b.post(t, signGitHub("kept-2", "push", body)).body)
	})
}

// TestAmbiguousJSONKeys: a body whose id or type key appears twice, or also
// in another letter case, is refused: parsers disagree on which one counts.
func TestAmbiguousJSONKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bodies := map[string]string{
		"id in two cases":     `{"id": "evt_amb1", "ID": "evt_other", "type": "invoice.paid"}`,
		"id twice":            `{"id": "evt_amb2", "type": "invoice.paid", "id": "evt_other"}`,
		"type in two cases":   `{"id": "evt_amb3", "type": "invoice.paid", "Type": "charge.refunded"}`,
		"type twice":          `{"type": "invoice.paid", "id": "evt_amb4", "type": "charge.refunded"}`,
		"only the other case": `{"Id": "evt_amb5", "type": "invoice.paid"}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			claims, jobs := b.claims(t), b.jobs(t)
			r := b.post(t, signStripe([]byte(body), stripeSecret, time.Now()))
			require.Equal(t, http.StatusBadRequest, r.status, "%v", r.body)
			require.NotEmpty(t, r.body["error"])
			require.Equal(t, claims, b.claims(t))
			require.Equal(t, jobs, b.jobs(t))
		})
	}
	t.Run("hmac json path", func(t *testing.T) {
		r := b.post(t, signAcme("thing.happened", []byte(`{"event": {"id": "a-1"}, "Event": {"id": "a-2"}}`)))
		require.Equal(t, http.StatusBadRequest, r.status, "%v", r.body)
	})
	t.Run("other keys may repeat", func(t *testing.T) {
		r := b.post(t, signStripe([]byte(`{"id": "evt_fine", "type": "invoice.paid", "x": 1, "X": 2, "data": {"id": 1, "ID": 2}}`), stripeSecret, time.Now()))
		require.Equal(t, accepted, r.body)
	})
}

// TestContentEncodingIsStored: a body signed over its gzip bytes is kept
// with its Content-Encoding, for the worker to forward as received.
func TestContentEncodingIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff not really gzip, but signed as is")
	req := signGitHub("gz-1", "push", body)
	req.header.Set("Content-Encoding", "gzip")
	require.Equal(t, accepted, b.post(t, req).body)
	var enc string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT content_encoding FROM webhook_event_claims WHERE provider = 'github' AND event_id = 'gz-1'`).Scan(&enc))
	require.Equal(t, "gzip", enc)
}

// TestUnauthenticatedRequestsChooseNoLabel sends 1,000 requests with
// made-up methods, paths and providers: the metrics' series count does not
// move.
func TestUnauthenticatedRequestsChooseNoLabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	junk := func(i int) {
		method := fmt.Sprintf("JUNK%04d", i)
		for _, path := range []string{"/webhooks/stripe", fmt.Sprintf("/webhooks/nope%d", i), fmt.Sprintf("/x/%d", i)} {
			req, err := http.NewRequest(method, b.base+path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		unknown := signStripe(stripeEvent(fmt.Sprintf("evt_j%d", i), "invoice.paid"), stripeSecret, time.Now())
		unknown.provider = fmt.Sprintf("nope%d", i)
		require.Equal(t, http.StatusNotFound, b.post(t, unknown).status)
	}
	junk(0) // the first of each kind may add its series, as may a scrape
	b.metrics(t)
	before := b.metrics(t)
	for i := 1; i <= 1000; i++ {
		junk(i)
	}
	after := b.metrics(t)
	require.Equal(t, seriesCount(before), seriesCount(after), "new series:\n%s", newSeries(before, after))
}

// newSeries lists the series of after that before lacks.
func newSeries(before, after string) string {
	had := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		name, _, _ := strings.Cut(l, " ")
		had[name] = true
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if name, _, _ := strings.Cut(l, " "); l != "" && !strings.HasPrefix(l, "#") && !had[name] {
			out = append(out, name)
		}
	}
	return strings.Join(out, "\n")
}

// TestEventTypesNoRouteNamesShareALabel: verified event types are bounded
// by the config: only types that a route names keep their own label.
func TestEventTypesNoRouteNamesShareALabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 20 {
		require.Equal(t, accepted, b.post(t, signStripe(stripeEvent(fmt.Sprintf("evt_t%d", i), fmt.Sprintf("made.up%d", i)), stripeSecret, time.Now())).body)
	}
	require.Equal(t, accepted, b.post(t, signStripe(stripeEvent("evt_named", "checkout.session.completed"), stripeSecret, time.Now())).body)
	m := b.metrics(t)
	require.Contains(t, m, `hookgate_claims_created_total{event_type="other",provider="stripe"} 20`)
	require.Contains(t, m, `hookgate_claims_created_total{event_type="checkout.session.completed",provider="stripe"} 1`)
	require.NotContains(t, m, "made.up")
}

// TestLongProviderSegmentLogsLittle posts to a provider segment of about
// 1 MB: the log grows by well under 1 KB.
func TestLongProviderSegmentLogsLittle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := len(b.logs.String())
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	seg := strings.Repeat("a", 1<<20-200)
	_, err = fmt.Fprintf(conn, "POST /webhooks/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-Pad: %s\r\n\r\n{}", seg, seg[:100])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Eventually(t, func() bool { return strings.Contains(b.logs.String()[before:], "unknown provider") },
		5*time.Second, 10*time.Millisecond, "the request is logged")
	require.Less(t, len(b.logs.String())-before, 1024)
}

func (s *server) metrics(t testing.TB) string {
	t.Helper()
	resp, err := client.Get(s.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw)
}

// seriesCount counts the samples of a Prometheus text exposition.
func seriesCount(metrics string) int {
	n := 0
	for _, l := range strings.Split(metrics, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// TestPoisonContentTypeBesideGoodSenders: eight senders resend signed
// requests whose Content-Type no text column can hold (0xFF) while good
// senders post 200 events. Each poisoned request is refused 400, none 503;
// every good event is claimed; nothing is logged at ERROR.
func TestPoisonContentTypeBesideGoodSenders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const poisoned, tries, good, senders = 8, 10, 200, 8
	statuses := map[int]int{} // status -> poisoned replies
	var goodFailed []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range poisoned {
		wg.Go(func() {
			req := signStripe(stripeEvent(fmt.Sprintf("evt_poison_%d", p), "invoice.paid"), stripeSecret, time.Now())
			req.header.Set("Content-Type", "\xff")
			for range tries {
				r := b.post(t, req)
				mu.Lock()
				statuses[r.status]++
				mu.Unlock()
			}
		})
	}
	for s := range senders {
		wg.Go(func() {
			for i := s; i < good; i += senders {
				id := fmt.Sprintf("evt_good_%d", i)
				if r := b.post(t, signStripe(stripeEvent(id, "invoice.paid"), stripeSecret, time.Now())); r.status != http.StatusOK {
					mu.Lock()
					goodFailed = append(goodFailed, fmt.Sprintf("%s: %d", id, r.status))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()

	require.Empty(t, goodFailed, "every good event is acknowledged")
	require.Equal(t, map[int]int{http.StatusBadRequest: poisoned * tries}, statuses, "refused for what they are, never 503")
	require.Equal(t, good, b.count(t, `SELECT count(*) FROM webhook_event_claims WHERE event_id LIKE 'evt_good_%'`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM webhook_event_claims WHERE event_id LIKE 'evt_poison_%'`))
	require.True(t, strings.Contains(b.metrics(t), `hookgate_ingest_unavailable_total{provider="stripe"} 0`), "no claim failed")
	require.NotContains(t, b.logs.String(), `"level":"ERROR"`)
}
