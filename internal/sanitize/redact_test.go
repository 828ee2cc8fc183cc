package sanitize_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/sanitize"
)

// secret has characters that every encoding changes: /, +, =, <, &, a space
// and a quote.
const (
	token  = `sk_live_4eC39HqL/yjW+d=<&>"x`
	bearer = "Bearer " + token
)

func jsonEscaped(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s)
	j := strings.TrimSpace(b.String())
	return j[1 : len(j)-1]
}

func TestRedactorForms(t *testing.T) {
	t.Parallel()
	r := sanitize.NewRedactor(bearer)
	for name, echoed := range map[string]string{
		"Raw":              bearer,
		"TokenAlone":       token,
		"QueryEscape":      url.QueryEscape(bearer),
		"PathEscape":       url.PathEscape(bearer),
		"TokenQuery":       url.QueryEscape(token),
		"TokenPath":        url.PathEscape(token),
		"LowerHex":         regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(token), strings.ToLower),
		"JSON":             jsonEscaped(bearer, false),
		"JSONHTML":         jsonEscaped(bearer, true),
		"JSONTokenHTML":    jsonEscaped(token, true),
		"JSONSlashEscaped": strings.ReplaceAll(jsonEscaped(token, false), "/", `\/`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := r.String(`{"error":"invalid credentials ` + echoed + `"}`)
			require.NotContains(t, got, "4eC39HqL", got)
			require.Contains(t, got, sanitize.Redacted)
			require.True(t, strings.HasPrefix(got, `{"error":"invalid credentials `), got)
		})
	}
}

func TestRedactorBasic(t *testing.T) {
	t.Parallel()
	r := sanitize.NewRedactor("Basic " + base64.StdEncoding.EncodeToString([]byte("shipper:hunter2-pass")))
	for _, echoed := range []string{"shipper:hunter2-pass", "hunter2-pass", base64.StdEncoding.EncodeToString([]byte("shipper:hunter2-pass"))} {
		require.NotContains(t, r.String("bad login "+echoed), "hunter2", echoed)
	}
}

func TestRedactorLeavesOtherText(t *testing.T) {
	t.Parallel()
	r := sanitize.NewRedactor("whsec_abcdefgh", "abc") // too short to look for
	require.Equal(t, "HTTP 401 Unauthorized: abc", r.String("HTTP 401 Unauthorized: abc"))
	require.Equal(t, "x [redacted] y", r.String("x whsec_abcdefgh y"))
	require.Equal(t, "ab x", sanitize.NewRedactor("", "ab").String("ab x"), "nothing to redact")
	var none *sanitize.Redactor
	require.Equal(t, "as is", none.String("as is"))
	require.Equal(t, []byte("as is"), none.Head([]byte("as is"), true))
}

// A secret cut by the end of what was read is redacted by the prefix it
// leaves; one cut by a later Cut is redacted before it.
func TestRedactorSplitAtCut(t *testing.T) {
	t.Parallel()
	r := sanitize.NewRedactor(bearer)
	body := "invalid credentials " + bearer + " and more"
	for cut := len("invalid credentials ") + 1; cut < len("invalid credentials ")+len(bearer); cut++ {
		head := r.Head([]byte(body[:cut]), true)
		require.Equal(t, "invalid credentials "+sanitize.Redacted, string(head), "cut at %d", cut)
	}
	// Not truncated: a text that merely ends like a secret begins is kept.
	require.Equal(t, "ends with Bear", string(r.Head([]byte("ends with Bear"), false)))

	// Redacting first, then cutting, never leaves a stub of the secret.
	for n := 25; n < 60; n++ {
		got := sanitize.Cut(r.String(body), n)
		require.NotContains(t, got, "sk_l", n)
		require.NotContains(t, got, "Bearer s", n)
	}
}

func TestRedactorHandler(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := sanitize.NewRedactor(bearer)
	log := slog.New(r.Handler(slog.NewJSONHandler(&out, nil)))
	log.With(slog.String("ctx", "with "+token)).WithGroup("g").Error("msg "+token,
		slog.String("reason", "HTTP 401: "+url.QueryEscape(token)),
		slog.Any("error", errors.New("wrapped: "+bearer)),
		slog.Group("inner", slog.String("v", token)),
		slog.Int("status", 401))
	require.NotContains(t, out.String(), "4eC39HqL", out.String())
	require.Contains(t, out.String(), `"status":401`)
	require.Equal(t, 5, strings.Count(out.String(), sanitize.Redacted), out.String())
}

// TestRedactorAdd: a value added later (a secret read again from its file)
// is redacted from the next call on, in its every form, in text and in the
// log, and the values from before still are.
func TestRedactorAdd(t *testing.T) {
	t.Parallel()
	r := sanitize.NewRedactor()
	var logs bytes.Buffer
	logger := slog.New(r.Handler(slog.NewTextHandler(&logs, nil)))
	logger.Info("before", slog.String("v", "rotated-secret/0001"))
	require.Contains(t, logs.String(), "rotated-secret/0001", "not yet known")
	r.Add("old-secret-0000")
	r.Add("rotated-secret/0001")
	require.Equal(t, "[redacted] [redacted] [redacted]", r.String("old-secret-0000 rotated-secret/0001 rotated-secret%2F0001"))
	require.Equal(t, []byte("x[redacted]"), r.Head([]byte("xrotated-sec"), true))
	logs.Reset()
	logger.Info("after", slog.String("v", "rotated-secret/0001"))
	require.NotContains(t, logs.String(), "rotated-secret")
}
