package deliver

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
)

// truncatedKey is the entry a bounded header set ends with when headers
// had to be left out; not a valid header name, so it names no real one.
const truncatedKey = "(truncated)"

// alwaysSecret are the headers whose values the history never keeps,
// whatever the route: credentials and the signature over the body.
var alwaysSecret = []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
	standardwebhooks.HeaderWebhookSignature}

// sentRequest is req as the attempt history keeps it: the values of the
// route's secret_headers and of alwaysSecret shown as [redacted], every
// other value (and the URL, its password masked) through the worker's
// redactor, and the headers bounded to claim.MaxHistoryHeaderBytes; body,
// what was sent, through the same redactor and cut to its first 2 KiB (an
// encoded body forwarded as received is named, not shown).
func (w *Worker) sentRequest(r *route.Route, req *http.Request, body []byte) *claim.SentRequest {
	secret := map[string]bool{}
	for _, name := range alwaysSecret {
		secret[http.CanonicalHeaderKey(name)] = true
	}
	for name := range r.SecretHeaders {
		secret[http.CanonicalHeaderKey(name)] = true
	}
	h := req.Header.Clone()
	if req.ContentLength > 0 {
		h.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
	return &claim.SentRequest{
		Method:  req.Method,
		URL:     w.redact.String(cleanValue(req.URL.Redacted())),
		Headers: w.historyHeaders(h, secret),
		Body:    w.sentBody(req.Header.Get("Content-Encoding"), body),
	}
}

// sentBody is body as the history keeps it: redacted of the worker's
// secrets, then its first responseBytes as text, like an answer's. A body
// forwarded encoded (gzip, as the provider sent it) is not text: it is
// named with its size instead.
func (w *Worker) sentBody(encoding string, body []byte) *string {
	if encoding != "" {
		s := "(" + cleanValue(cutBytes(encoding, 32)) + "-encoded body of " + strconv.Itoa(len(body)) + " bytes, as received; not shown)"
		return &s
	}
	head := body[:min(len(body), snippetBytes)] // redacted before it is cut to responseBytes
	return responseText(w.redact.Head(head, len(head) < len(body)))
}

// answerHeaders are an answer's headers as the history keeps them (see
// historyHeaders); cookies it sets are redacted.
func (w *Worker) answerHeaders(h http.Header) map[string][]string {
	return w.historyHeaders(h, map[string]bool{"Set-Cookie": true})
}

// historyHeaders bounds h for the history: names in order, values cleaned
// (valid UTF-8, no NUL or control characters: the downstream's bytes are
// hostile), secret ones replaced by [redacted], the rest redacted of the
// worker's secrets, and cut once names and values reach
// claim.MaxHistoryHeaderBytes, the last value on a character boundary. A
// cut set ends with a (truncated) entry saying how many were left out.
func (w *Worker) historyHeaders(h http.Header, secret map[string]bool) map[string][]string {
	out := make(map[string][]string, len(h))
	budget := claim.MaxHistoryHeaderBytes
	names := slices.Sorted(maps.Keys(h))
	for i, name := range names {
		shown := cutBytes(cleanValue(name), 256)
		var values []string
		for _, v := range h[name] {
			v = cleanValue(v)
			if secret[http.CanonicalHeaderKey(name)] {
				v = sanitize.Redacted
			} else {
				v = w.redact.String(v)
			}
			cost := len(shown) + len(v)
			if cost > budget {
				if room := budget - len(shown); room > 16 {
					values = append(values, cutBytes(v, room-len("…"))+"…")
				}
				budget = 0
				break
			}
			budget -= cost
			values = append(values, v)
		}
		if len(values) > 0 {
			out[shown] = values
		}
		if budget == 0 {
			if left := len(names) - i - 1; left > 0 || len(values) < len(h[name]) {
				out[truncatedKey] = []string{strconv.Itoa(left) + " more headers left out: over " +
					strconv.Itoa(claim.MaxHistoryHeaderBytes>>10) + " KiB"}
			}
			break
		}
	}
	return out
}

// cleanValue makes s storable and printable: valid UTF-8, control
// characters (NUL among them, which Postgres refuses) as spaces.
func cleanValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// cutBytes cuts s to at most n bytes on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:max(n, 0)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// exhausted begins the reason of a delivery failed by its last attempt.
// After a retry the attempt's number (Hookgate-Attempt) runs ahead of its
// place in the run of attempts (a retry begins a new one), and both are named: not
// "(2 of 2)" for attempt 4.
func exhausted(number, runAttempt, runMax int) string {
	if number != runAttempt {
		return "attempts exhausted (attempt " + strconv.Itoa(number) + ", " + strconv.Itoa(runAttempt) + " of " +
			strconv.Itoa(runMax) + " in this run): "
	}
	return "attempts exhausted (" + strconv.Itoa(runAttempt) + " of " + strconv.Itoa(runMax) + "): "
}
