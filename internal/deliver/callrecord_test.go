package deliver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// What the history keeps of a request: secret values redacted (the
// route's secret_headers, Authorization, the signature, a password in the
// URL), every other value as sent.
func TestSentRequestRedactsSecrets(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Routes: []config.Route{{
		Name: "ship", URL: "https://user:hunter2-url-pass@downstream.internal/hooks/ship?x=1", SigningSecretEnv: "SHIP_SECRET",
		Headers:       map[string]string{"X-Tenant": "acme"},
		SecretHeaders: map[string]string{"X-Api-Key": "SHIP_KEY", "Authorization": "SHIP_AUTH"},
	}}}
	w, err := NewWorker(Options{Config: cfg, SigningSecrets: map[string][]byte{"ship": []byte(testSigningSecret)},
		SecretHeaders: map[string]map[string]string{"ship": {"X-Api-Key": "sk_live_abcdefghijkl", "Authorization": "Bearer tok_abcdefghijkl"}}})
	require.NoError(t, err)
	r := w.runtimes["ship"]
	d := claim.Delivery{Provider: "stripe", EventID: "evt_1", Route: "ship", EventType: "invoice.paid",
		ContentType: "application/json", Payload: []byte(`{"id":"evt_1"}`)}
	req, body, err := w.request(context.Background(), r, d, 4)
	require.NoError(t, err)

	sent := w.sentRequest(r.Route, req, body)
	require.Equal(t, http.MethodPost, sent.Method)
	require.NotContains(t, sent.URL, "hunter2-url-pass")
	require.Contains(t, sent.URL, "downstream.internal/hooks/ship?x=1")
	for _, name := range []string{"X-Api-Key", "Authorization", "Webhook-Signature"} {
		require.Equal(t, []string{"[redacted]"}, sent.Headers[name], name)
	}
	require.Equal(t, []string{"acme"}, sent.Headers["X-Tenant"])
	require.Equal(t, []string{"4"}, sent.Headers["Hookgate-Attempt"])
	require.Equal(t, []string{"14"}, sent.Headers["Content-Length"])
	require.Equal(t, []string{d.Key().IdempotencyKey()}, sent.Headers["Idempotency-Key"])
	all := strings.Join(flatten(sent.Headers), " ")
	for _, secret := range []string{"sk_live_abcdefghijkl", "tok_abcdefghijkl", testSigningSecret} {
		require.NotContains(t, all, secret)
	}
}

func flatten(h map[string][]string) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k)
		out = append(out, vs...)
	}
	return out
}

// An answer's headers are hostile: however many and however long, the
// history keeps at most 8 KiB of them, cut on a character boundary,
// storable (no NUL, valid UTF-8), cookies and echoed secrets redacted.
func TestAnswerHeadersAreBounded(t *testing.T) {
	t.Parallel()
	w, err := NewWorker(Options{Config: &config.Config{Routes: []config.Route{{Name: "ship", URL: "http://d.internal/"}}},
		SecretHeaders: map[string]map[string]string{"ship": {"X-Api-Key": "sk_live_abcdefghijkl"}}})
	require.NoError(t, err)
	h := http.Header{}
	h.Set("Set-Cookie", "session=s3cr3t-session")
	h.Set("X-Echo", "you sent sk_live_abcdefghijkl")
	h.Set("X-Bad", "a\x00b\xffc")
	h.Set("X-Big", strings.Repeat("é", 3000)) // 6,000 bytes
	for i := range 200 {
		h.Set("X-Many-"+strings.Repeat("n", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("v", 40))
	}
	got := w.answerHeaders(h)
	size := 0
	for k, vs := range got {
		size += len(k)
		for _, v := range vs {
			size += len(v)
			require.NotContains(t, v, "\x00")
			require.True(t, strings.ToValidUTF8(v, "") == v, "valid UTF-8: %q", v)
		}
	}
	require.LessOrEqual(t, size, claim.MaxHistoryHeaderBytes+200, "bounded, with the note of what was left out")
	require.Equal(t, []string{"[redacted]"}, got["Set-Cookie"])
	require.Equal(t, []string{"you sent [redacted]"}, got["X-Echo"])
	require.Equal(t, []string{"a b\uFFFDc"}, got["X-Bad"])
	require.Contains(t, got[truncatedKey][0], "more headers left out")
	require.Len(t, got["X-Big"][0], 6000)

	small := w.answerHeaders(http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, map[string][]string{"Content-Type": {"application/json"}}, small, "nothing cut, no note")
}

func TestExhaustedNamesTheRun(t *testing.T) {
	t.Parallel()
	require.Equal(t, "attempts exhausted (2 of 2): ", exhausted(2, 2, 2))
	require.Equal(t, "attempts exhausted (attempt 4, 2 of 2 in this run): ", exhausted(4, 2, 2))
}

// The history keeps the body that was sent: the route's shaped body, not
// the payload, redacted of the worker's secrets and cut to 2 KiB; a body
// forwarded encoded is named, not shown.
func TestSentRequestKeepsTheShapedBody(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Routes: []config.Route{{
		Name: "ship", URL: "https://downstream.internal/hooks/ship",
		Body:          `{order: .data.id, note: .data.note}`,
		SecretHeaders: map[string]string{"X-Api-Key": "SHIP_KEY"},
	}, {Name: "raw", URL: "https://downstream.internal/hooks/raw"}}}
	const key = "sk_live_bodyechoedkey"
	w, err := NewWorker(Options{Config: cfg, SecretHeaders: map[string]map[string]string{"ship": {"X-Api-Key": key}}})
	require.NoError(t, err)

	d := claim.Delivery{Provider: "stripe", EventID: "evt_1", Route: "ship", EventType: "invoice.paid",
		ContentType: "application/json", Payload: []byte(`{"id":"evt_1","data":{"id":"ord_7","note":"key ` + key + `","big":"x"}}`)}
	req, body, err := w.request(context.Background(), w.runtimes["ship"], d, 1)
	require.NoError(t, err)
	sent := w.sentRequest(w.runtimes["ship"].Route, req, body)
	require.NotNil(t, sent.Body)
	require.JSONEq(t, `{"order":"ord_7","note":"key [redacted]"}`, *sent.Body, "the shaped body, the secret redacted")

	long := []byte(`{"id":"evt_2","pad":"` + strings.Repeat("é", 3000) + `"}`)
	d = claim.Delivery{Provider: "stripe", EventID: "evt_2", Route: "raw", ContentType: "application/json", Payload: long}
	req, body, err = w.request(context.Background(), w.runtimes["raw"], d, 1)
	require.NoError(t, err)
	sent = w.sentRequest(w.runtimes["raw"].Route, req, body)
	require.LessOrEqual(t, len(*sent.Body), 2<<10)
	require.Greater(t, len(*sent.Body), 2<<10-4)
	require.True(t, utf8.ValidString(*sent.Body), "cut on a character boundary")
	require.True(t, strings.HasPrefix(*sent.Body, `{"id":"evt_2","pad":"éé`))

	d.ContentEncoding = "gzip"
	d.Payload = []byte{0x1f, 0x8b, 0, 1, 2}
	req, body, err = w.request(context.Background(), w.runtimes["raw"], d, 1)
	require.NoError(t, err)
	sent = w.sentRequest(w.runtimes["raw"].Route, req, body)
	require.Equal(t, "(gzip-encoded body of 5 bytes, as received; not shown)", *sent.Body)
}
