package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code int
		want verdict
	}{
		{200, delivered}, {201, delivered}, {202, delivered}, {204, delivered}, {299, delivered},
		{301, rejected}, {302, rejected}, {307, rejected}, {308, rejected},
		{400, rejected}, {401, rejected}, {403, rejected}, {404, rejected}, {410, rejected},
		{413, rejected}, {422, rejected}, {451, rejected}, {499, rejected},
		{408, retryable}, {409, retryable}, {425, retryable}, {429, retryable},
		{500, retryable}, {502, retryable}, {503, retryable}, {504, retryable}, {599, retryable},
		{600, retryable}, {100, retryable},
	} {
		require.Equal(t, tt.want, classifyStatus(tt.code), "HTTP %d", tt.code)
	}
}

func TestClassifyResponse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	for _, tt := range []struct {
		name       string
		code       int
		header     http.Header
		want       verdict
		reason     string
		retryAfter time.Duration
	}{
		{name: "Success", code: 200, want: delivered},
		{name: "ServerError", code: 503, want: retryable, reason: "HTTP 503 Service Unavailable"},
		{name: "RetryAfterSeconds", code: 429, header: h("Retry-After", "7"), want: retryable,
			reason: "HTTP 429 Too Many Requests", retryAfter: 7 * time.Second},
		{name: "RetryAfterDate", code: 503, header: h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)),
			want: retryable, reason: "HTTP 503 Service Unavailable", retryAfter: 90 * time.Second},
		{name: "RetryAfterIgnoredOnRejection", code: 400, header: h("Retry-After", "7"), want: rejected,
			reason: "HTTP 400 Bad Request"},
		{name: "Rejected", code: 422, want: rejected, reason: "HTTP 422 Unprocessable Entity"},
		{name: "Redirect", code: 302, header: h("Location", "https://elsewhere.example/x?token=secret"), want: rejected,
			reason: "redirected (HTTP 302 Found); redirects are not followed"},
		{name: "UnknownStatus", code: 599, want: retryable, reason: "HTTP 599"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hd := tt.header
			if hd == nil {
				hd = http.Header{}
			}
			o := classifyResponse(tt.code, hd, now)
			require.Equal(t, tt.want, o.verdict)
			require.Equal(t, tt.code, o.status)
			require.Equal(t, tt.reason, o.reason)
			require.Equal(t, tt.retryAfter, o.retryAfter)
		})
	}
}

// A route's retry_statuses turn the 4xx codes it lists into retryable
// answers, Retry-After honoured; other codes keep their verdict.
func TestClassifyResponseRetryStatuses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	retry := []int{404, 423}
	for _, tt := range []struct {
		code int
		want verdict
	}{
		{404, retryable}, {423, retryable}, {429, retryable},
		{400, rejected}, {410, rejected}, {302, rejected},
		{200, delivered}, {503, retryable},
	} {
		o := classifyResponse(tt.code, http.Header{"Retry-After": {"3"}}, now, retry...)
		require.Equal(t, tt.want, o.verdict, "HTTP %d", tt.code)
		if tt.want == retryable {
			require.Equal(t, 3*time.Second, o.retryAfter, "HTTP %d", tt.code)
		}
	}
	o := classifyResponse(404, http.Header{}, now, retry...)
	require.Equal(t, "HTTP 404 Not Found", o.reason)
	require.Equal(t, rejected, classifyResponse(404, http.Header{}, now).verdict, "without retry_statuses")
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"1", time.Second},
		{" 120 ", 2 * time.Minute},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0}, // in the past
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999999", maxRetryAfter}, // overflows uint64
		{"9999999999", maxRetryAfter},
	} {
		require.Equal(t, tt.want, parseRetryAfter(tt.in, now), "Retry-After %q", tt.in)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	u := "http://user:hunter2@example.internal:8080/hooks?token=s3cret"
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: u, Err: err} }
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"Deadline", wrap(context.DeadlineExceeded), "timeout after 10s"},
		{"NetTimeout", wrap(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), "timeout after 10s"},
		{"Refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), "connection refused"},
		{"Reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), "connection reset by peer"},
		{"DNS", wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "example.internal", IsNotFound: true}}),
			"DNS lookup failed: host example.internal not found"},
		{"EOF", wrap(errors.New("unexpected EOF")), "connection error: unexpected EOF"},
		{"ClosedEarly", wrap(fmt.Errorf("reading: %w", io.EOF)), "connection closed by the downstream before a response"},
		{"Other", wrap(errors.New("something\nodd happened")), "connection error: something odd happened"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := describe(tt.err, 10*time.Second)
			require.Equal(t, tt.want, got)
			require.NotContains(t, got, "hunter2")
			require.NotContains(t, got, "s3cret")
		})
	}

	t.Run("RealRefusedConnection", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/?token=s3cret", nil)
		require.NoError(t, err)
		_, err = http.DefaultClient.Do(req)
		require.Error(t, err)
		o := classifyError(err, time.Second)
		require.Equal(t, retryable, o.verdict)
		require.Equal(t, "connection refused", o.reason)
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestBound(t *testing.T) {
	t.Parallel()
	t.Run("OneLinePrintable", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "a b c d", bound("a\r\nb\x00\x07c \t d\n"))
		require.Equal(t, "bad byte", bound("bad\xffbyte"))
	})
	t.Run("BoundedOnACharacterBoundary", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{strings.Repeat("x", 2000), strings.Repeat("é", 700), strings.Repeat("日本", 400)} {
			got := bound(s)
			require.LessOrEqual(t, len(got), maxReasonLen)
			require.True(t, utf8.ValidString(got), "cut mid-character: %q", got[len(got)-8:])
			require.True(t, strings.HasSuffix(got, "…"))
		}
		require.Equal(t, "short", bound("short"))
	})
}

func TestHeaderValue(t *testing.T) {
	t.Parallel()
	require.Equal(t, "invoice.paid", headerValue("invoice.paid"))
	require.Equal(t, "a b c\td", headerValue("a\nb\rc\td"))
	require.Equal(t, "x y", headerValue("x\x7fy"))
}
