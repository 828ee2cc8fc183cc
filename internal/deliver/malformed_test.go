package deliver

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// leak is what the downstream of the malformed answers puts where Go's
// HTTP client quotes it.
const leak = "LEAKME"

// malformedAnswers are raw answers Go's HTTP client refuses, by the fixed
// reason each must get.
var malformedAnswers = []struct{ name, raw, reason string }{
	{"StatusCode", "HTTP/1.1 2x9" + leak + " OK\r\nContent-Length: 0\r\n\r\n", "bad status code"},
	{"StatusLine", leak + "\r\n\r\n", "bad status line"},
	{"Version", "HTTP/9." + leak + " 200 OK\r\nContent-Length: 0\r\n\r\n", "bad HTTP version"},
	{"HeaderWithoutColon", "HTTP/1.1 200 OK\r\nX-Card " + leak + "\r\nContent-Length: 0\r\n\r\n", "bad header"},
	{"FoldedFirstHeader", "HTTP/1.1 200 OK\r\n " + leak + ": 1\r\nContent-Length: 0\r\n\r\n", "bad header"},
	{"ContentLength", "HTTP/1.1 200 OK\r\nContent-Length: 12" + leak + "\r\n\r\n", "bad Content-Length"},
	{"TwoContentLengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2" + leak + "\r\n\r\nab", "bad Content-Length"},
	{"TransferEncoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + leak + "\r\n\r\n", "bad Transfer-Encoding"},
	{"TwoTransferEncodings", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: " + leak + "\r\n\r\n", "bad Transfer-Encoding"},
}

// serveRaw answers every connection to a new listener with raw, after
// reading the request's head, and returns the listener's URL.
func serveRaw(t *testing.T, raw string) string {
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
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = c.Write([]byte(raw))
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestDescribeMalformedAnswer: an answer Go's client cannot parse is
// named by a fixed reason, never with the bytes the downstream sent.
func TestDescribeMalformedAnswer(t *testing.T) {
	t.Parallel()
	for _, tt := range malformedAnswers {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := &http.Client{Timeout: 5 * time.Second}
			resp, err := client.Post(serveRaw(t, tt.raw), "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
			}
			require.Error(t, err, "Go's client takes the answer")
			require.Contains(t, err.Error(), leak, "the raw error quotes the answer")
			o := classifyError(err, time.Second)
			require.Equal(t, retryable, o.verdict)
			require.Equal(t, malformedPrefix+tt.reason, o.reason)
		})
	}
}

// TestDescribeLeavesQuotedValuesOut: an error describe has no name for
// is told without the value it quotes.
func TestDescribeLeavesQuotedValuesOut(t *testing.T) {
	t.Parallel()
	err := &net.OpError{Op: "read", Net: "tcp", Err: errString(`strange answer "` + leak + `" from the peer`)}
	got := describe(err, time.Second)
	require.NotContains(t, got, leak)
	require.Equal(t, "connection error: read tcp: strange answer (value left out)", got)
}

type errString string

func (e errString) Error() string { return string(e) }
