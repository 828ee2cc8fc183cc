package deliver

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJudge pins the one decision every reader of an attempt shares:
// whether it delivered, is retried and counts against the breaker, or
// fails the delivery for good and is ignored by the breaker.
func TestJudge(t *testing.T) {
	t.Parallel()
	retry := []int{404}
	for _, tt := range []struct {
		name      string
		code      int
		succeeded bool
		want      verdict
	}{
		{"NoAnswer", 0, true, retryable},
		{"OK", 200, true, delivered},
		{"NoContent", 204, true, delivered},
		{"OKNotSatisfyingSuccess", 200, false, retryable},
		{"ServerError", 503, true, retryable},
		{"TooManyRequests", 429, true, retryable},
		{"Conflict", 409, true, retryable},
		{"RetryStatus", 404, true, retryable},
		{"BadRequest", 400, true, rejected},
		{"Redirect", 302, true, rejected},
		{"ServerErrorWhateverSuccessSays", 500, false, retryable},
		{"RejectionWhateverSuccessSays", 422, false, rejected},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := judge(tt.code, retry, tt.succeeded)
			require.Equal(t, tt.want, v)
			require.Equal(t, v == delivered, v.delivers())
			require.Equal(t, v == retryable, v.retries())
			require.Equal(t, v == retryable, v.breakerFailure(), "the breaker counts exactly the retried attempts")
			require.Equal(t, v == rejected, v.permanent())
			if tt.succeeded && tt.code != 0 {
				require.Equal(t, v, classifyResponse(tt.code, http.Header{}, time.Now(), retry...).verdict, "classifyResponse agrees")
			}
		})
	}
}

// TestFailureClass pins the classes a route's breaker keeps as its last
// failure: a status line of Go's own, or a fixed name; never the
// downstream's text, nor a host name.
func TestFailureClass(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		reason string
		want   string
	}{
		{"Delivered", 200, "", ""},
		{"ServerError", 503, "HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"},
		{"StatusLineOfOurOwn", 502, "anything the downstream said", "HTTP 502 Bad Gateway"},
		{"UnknownStatus", 599, "HTTP 599", "HTTP 599"},
		{"NotSatisfied", 200, notSatisfied, notSatisfied},
		{"Timeout", 0, "timeout after 5s", "timeout"},
		{"Refused", 0, "connection refused", "connection refused"},
		{"Reset", 0, "connection reset by peer", "connection reset"},
		{"Closed", 0, "connection closed by the downstream before a response", "connection closed"},
		{"DNS", 0, "DNS lookup failed: host secret-host.internal not found", "DNS lookup failed"},
		{"TLS", 0, "TLS certificate not accepted: not valid for the URL's host", "TLS failed"},
		{"Malformed", 0, malformedPrefix + "bad header", "malformed response"},
		{"Other", 0, "connection error: read tcp 10.0.0.1: weird", "connection error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, failureClass(tt.status, tt.reason))
		})
	}
}
