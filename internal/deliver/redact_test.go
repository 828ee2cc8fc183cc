package deliver

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/sanitize"
)

const echoedToken = "sk_live_Zq9Xv7Lm/Pw+Kd=Q4"

// requireNoTrace fails when s holds any 4 bytes in a row of secret.
func requireNoTrace(t *testing.T, s, secret string) {
	t.Helper()
	for i := 0; i+4 <= len(secret); i++ {
		require.NotContains(t, s, secret[i:i+4], "a piece of the secret is left: %q", s)
	}
}

func TestHeadRedactsEchoedSecrets(t *testing.T) {
	t.Parallel()
	secret := "Bearer " + echoedToken
	w := &Worker{redact: redactorOf(Options{SecretHeaders: map[string]map[string]string{"ship": {"Authorization": secret}}})}
	jsonForm, err := json.Marshal(secret)
	require.NoError(t, err)
	forms := map[string]string{
		"Raw":         secret,
		"Token":       echoedToken,
		"QueryEscape": url.QueryEscape(secret),
		"PathEscape":  url.PathEscape(echoedToken),
		"JSON":        strings.Trim(string(jsonForm), `"`),
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for cut := 1; cut < len(form); cut++ {
				head := []byte(strings.Repeat("x", snippetBytes-cut) + form)[:snippetBytes]
				require.Equal(t, strings.Repeat("x", snippetBytes-cut)+sanitize.Redacted, string(w.redactHead(head)), "cut %d", cut)
			}
		})
	}
}

// Without a redactor given, the worker redacts what it sends: its signing
// secrets and secret header values.
func TestRedactorOfDefault(t *testing.T) {
	t.Parallel()
	r := redactorOf(Options{
		SigningSecrets: map[string][]byte{"ship": []byte("whsec_c2lnbmluZyBrZXk=")},
		SecretHeaders:  map[string]map[string]string{"ship": {"X-Api-Key": "key-0123"}},
	})
	require.Equal(t, "[redacted] [redacted] [redacted]", r.String("whsec_c2lnbmluZyBrZXk= c2lnbmluZyBrZXk= key-0123"))
	given := sanitize.NewRedactor("other-secret")
	require.Same(t, given, redactorOf(Options{Redactor: given, SecretHeaders: map[string]map[string]string{"ship": {"X-Api-Key": "key-0123"}}}))
}

func TestResultRedactsEchoedSecrets(t *testing.T) {
	t.Parallel()
	w := &Worker{redact: redactorOf(Options{SecretHeaders: map[string]map[string]string{"ship": {"Authorization": "Bearer " + echoedToken, "X-Pin": "98765432"}}})}
	o := callResult{verdict: delivered, result: []byte(`{"id":"shp_1","echo":"` + strings.ReplaceAll(echoedToken, "/", `\/`) + `"}`)}
	w.redactResult(&o)
	require.JSONEq(t, `{"id":"shp_1","echo":"[redacted]"}`, string(o.result))
	o = callResult{verdict: delivered, result: []byte(`{"pin":98765432}`)}
	w.redactResult(&o)
	require.Equal(t, `"[redacted]"`, string(o.result), "still JSON")
	o = callResult{verdict: delivered, result: []byte(`"shp_1"`)}
	w.redactResult(&o)
	require.Equal(t, `"shp_1"`, string(o.result))
}

// The response kept in the attempt history is the redacted head cut to
// responseBytes on a character boundary, as text Postgres accepts: an
// echoed secret leaves no trace at any offset around the cut.
func TestResponseRedactsAndBounds(t *testing.T) {
	t.Parallel()
	secret := "Bearer " + echoedToken
	w := &Worker{redact: redactorOf(Options{SecretHeaders: map[string]map[string]string{"ship": {"Authorization": secret}}})}
	for lead := responseBytes - len(secret) - 4; lead <= responseBytes+4; lead++ {
		body := strings.Repeat("x", lead) + secret + strings.Repeat("y", snippetBytes)
		head := []byte(body)[:snippetBytes]
		got := *responseText(w.redactHead(head))
		require.LessOrEqual(t, len(got), responseBytes)
		requireNoTrace(t, got, echoedToken)
	}
	got := *responseText([]byte(strings.Repeat("a", responseBytes-1) + "é" + "\x00"))
	require.Equal(t, strings.Repeat("a", responseBytes-1), got, "a character cut in two is dropped")
	require.Equal(t, "a\uFFFDb\uFFFD", *responseText([]byte("a\x00b\xff")))
}
