package reconcile

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTransportBoundsAnswers: an answer over limit is refused,
// announced or chunked; one at the bound is read whole.
func TestTransportBoundsAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		_, _ = io.Copy(w, io.LimitReader(zeros{}, int64(n)))
	}))
	t.Cleanup(srv.Close)
	const limit = 64 << 10
	client := &http.Client{Transport: &transport{next: http.DefaultTransport, max: limit}}
	get := func(query string) ([]byte, error) {
		resp, err := client.Get(srv.URL + "?" + query)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	body, err := get("n=" + strconv.Itoa(limit))
	require.NoError(t, err)
	require.Len(t, body, limit)
	_, err = get("n=" + strconv.Itoa(limit+1))
	require.ErrorIs(t, err, errTooLarge)
	_, err = get("chunked=1&n=" + strconv.Itoa(limit+1))
	require.ErrorIs(t, err, errTooLarge)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRetryAfter reads both forms of Retry-After.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"7", 7 * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"", time.Second},
		{"soon", time.Second},
	} {
		require.Equal(t, tc.want, retryAfter(http.Header{"Retry-After": {tc.v}}, now), tc.v)
	}
}
