package deliver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/sanitize"
)

// maxReasonLen bounds last_error. A reason is one line of printable text.
const maxReasonLen = 500

// maxRetryAfter bounds a parsed Retry-After before it is capped by the
// route's backoff.max, so that absurd values cannot overflow a Duration.
const maxRetryAfter = 365 * 24 * time.Hour

// callResult is the classified result of one downstream call.
type callResult struct {
	verdict verdict
	// status is the HTTP status, 0 when no response arrived.
	status int
	// reason says why an attempt did not deliver: sanitized and bounded, so
	// it can go to last_error, logs and River's job errors. Empty on delivery.
	reason string
	// retryAfter is what a retryable answer's Retry-After header asked for; 0 when none.
	retryAfter time.Duration
	// result is what the route's result program took from a delivered
	// answer, as JSON; nil when none. resultErr says why a route that
	// records results has none; it never changes the verdict.
	result    []byte
	resultErr error
	// successErr is the route's success program's error, when it failed
	// rather than yielding something other than true (logged, never
	// stored: the reason is notSatisfied either way).
	successErr error
	// unsent: the request was never sent (its body program failed), so
	// the run is not counted as an attempt.
	unsent bool
	// response is the first responseBytes of the answer's body, redacted;
	// nil when no answer came.
	response *string
	// call is the attempt's row of the delivery's attempt history; nil
	// when no call was made.
	call *claim.Call
	// request is what was sent and responseHeaders the answer's headers,
	// as the history keeps them (callrecord.go); nil when not sent, or no
	// answer came.
	request         *claim.SentRequest
	responseHeaders map[string][]string
	// answered is when the answer (or the transport's error) came in, as
	// soon as the client returned it: the breaker counts answers in that
	// order. Zero when no request was sent.
	answered time.Time
}

// responseBytes bounds the part of an answer's body kept in the attempt
// history.
const responseBytes = 2 << 10

// responseText is the first responseBytes of a redacted body as text:
// cut on a character boundary, invalid UTF-8 and NUL bytes (which
// Postgres text refuses) replaced.
func responseText(body []byte) *string {
	if len(body) > responseBytes {
		body = body[:responseBytes]
		for i := 0; i < utf8.UTFMax && len(body) > 0 && !utf8.Valid(body); i++ {
			body = body[:len(body)-1]
		}
	}
	s := strings.ReplaceAll(strings.ToValidUTF8(string(body), "\uFFFD"), "\x00", "\uFFFD")
	return &s
}

// classifyResponse classifies a response from its status and headers.
// retry is the route's retry_statuses: 4xx codes it retries rather than
// rejects. The reason is the status line (and, for a redirect, that it was
// not followed), never text from the body: viewers read reasons in
// last_error and the attempts' error, and a downstream may echo what it
// was sent. The body's first bytes go to the attempt's response, which
// only operators read.
func classifyResponse(code int, h http.Header, now time.Time, retry ...int) callResult {
	o := callResult{verdict: judge(code, retry, true), status: code}
	if o.verdict == delivered {
		return o
	}
	reason := "HTTP " + strconv.Itoa(code)
	if text := http.StatusText(code); text != "" {
		reason += " " + text
	}
	if code >= 300 && code <= 399 {
		reason = "redirected (" + reason + "); redirects are not followed"
	}
	o.reason = bound(reason)
	if o.verdict == retryable {
		o.retryAfter = parseRetryAfter(h.Get("Retry-After"), now)
	}
	return o
}

// classifyError classifies a request that got no response. Every such
// failure is retryable: the downstream may be back on the next attempt.
func classifyError(err error, timeout time.Duration) callResult {
	return callResult{verdict: retryable, reason: bound(describe(err, timeout))}
}

// describe names a transport failure for an operator without quoting the
// URL (url.Error would), headers, or anything the downstream sent: an
// answer Go could not parse gets a fixed reason (malformedAnswer), and any
// other error's text is cut at its first quote.
func describe(err error, timeout time.Duration) string {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		hostErr x509.HostnameError
		authErr x509.UnknownAuthorityError
		recErr  tls.RecordHeaderError
		opErr   *net.OpError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout after " + timeout.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "DNS lookup failed: host " + sanitize.Line(dnsErr.Name) + " not found"
		}
		return "DNS lookup failed for host " + sanitize.Line(dnsErr.Name)
	case errors.As(err, &authErr):
		return "TLS certificate not accepted: signed by an unknown authority (tls.ca_file names the CA to trust)"
	case errors.As(err, &hostErr):
		return "TLS certificate not accepted: not valid for the URL's host"
	case errors.As(err, &certErr):
		return "TLS certificate not accepted: " + sanitize.Line(strings.TrimPrefix(certErr.Err.Error(), "x509: "))
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// An alert from the downstream's TLS stack: with TLS 1.3 a refused
		// client certificate shows up here, on the first read.
		return "TLS handshake failed: the downstream sent alert \"" + sanitize.Line(strings.TrimPrefix(opErr.Err.Error(), "tls: ")) +
			"\" (a client certificate it does not accept? see the route's tls.cert_file and tls.key_file)"
	case errors.As(err, &recErr):
		return "TLS handshake failed (is the route's URL http rather than https?)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the downstream before a response"
	}
	if reason, ok := malformedAnswer(err); ok {
		return reason
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error's text repeats the method and the full URL
	}
	return "connection error: " + sanitize.Line(unquoted(err.Error()))
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// Anything else, or a date in the past, is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// bound cleans s and cuts it to maxReasonLen bytes.
func bound(s string) string { return sanitize.Cut(sanitize.Line(s), maxReasonLen) }

// headerValue makes s safe as an HTTP header value: a verified event type is
// whatever the provider put in the body, and a control character in it
// would make every attempt fail before it is sent.
func headerValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// retryError is what Work returns for a retryable attempt, so that River
// schedules the next one. Its text lands in the job's errors.
type retryError struct {
	reason     string
	retryAfter time.Duration
}

func (e *retryError) Error() string {
	if e.retryAfter > 0 {
		return fmt.Sprintf("%s (Retry-After %s)", e.reason, e.retryAfter)
	}
	return e.reason
}
