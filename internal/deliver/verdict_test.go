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
