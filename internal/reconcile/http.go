package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The bounds on a provider's API, which is hostile input like a webhook.
const (
	// requestTimeout bounds one request, its body read included.
	requestTimeout = 30 * time.Second
	// maxResponseBytes bounds one answer: a page of 100 events, each at
	// most a few hundred kilobytes.
	maxResponseBytes = 32 << 20
	// pageSize is how many events or deliveries one request asks for, the
	// most either API gives.
	pageSize = 100
	// maxPages bounds one run's listing; a window that holds more fails
	// the run naming the bound (a narrower --since gets through).
	maxPages = 200
	// maxRateWaits is how many times one request waits out a 429.
	maxRateWaits = 3
	// maxRetryAfter caps one wait on Retry-After; a longer one fails the
	// run, and the next run tries again as scheduled.
	maxRetryAfter = 2 * time.Minute
)

// errTooLarge is an answer over maxResponseBytes.
var errTooLarge = errors.New("the provider's API answered more than the bound on an answer")

// httpClient returns the client every API call goes through: each
// exchange bounded in time and in the size of the answer, which is read
// whole before the client sees it, with auth set by authorize (when not
// nil) on every request, so that a rotated credential file is used at
// once.
func httpClient(authorize func(*http.Request) error) *http.Client {
	return &http.Client{Transport: &transport{next: http.DefaultTransport, authorize: authorize, max: maxResponseBytes}}
}

// transport sets the credential, bounds each exchange by requestTimeout
// and reads each answer's body whole, at most maxResponseBytes, so that
// the connection is done with whatever the client does with the body.
type transport struct {
	next      http.RoundTripper
	authorize func(*http.Request) error
	max       int64 // bytes of an answer's body
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeout)
	defer cancel()
	req = req.Clone(ctx)
	if t.authorize != nil {
		if err := t.authorize(req); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > t.max {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, t.max)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.max+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the provider's answer: %w", err)
	case int64(len(body)) > t.max:
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, t.max)
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return resp, nil
}

// retryAfter reads a Retry-After header (seconds or an HTTP date); 1s when
// absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return time.Second
}

// errRateLimited is a 429 that lasted past maxRateWaits or maxRetryAfter.
var errRateLimited = errors.New("the provider's API kept answering 429 (rate limited)")

// withRateLimit calls call, and again after waiting out each 429 it
// answers (limited tells one: its Retry-After header), at most
// maxRateWaits times.
func withRateLimit(ctx context.Context, call func() error, limited func(error) (http.Header, bool)) error {
	for try := 0; ; try++ {
		err := call()
		h, ok := limited(err)
		if !ok {
			return err
		}
		wait := retryAfter(h, time.Now())
		if try == maxRateWaits || wait > maxRetryAfter {
			return fmt.Errorf("%w: Retry-After %s", errRateLimited, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// statusError is an answer of the provider's API that is neither a page
// nor a 429, named by its status only: its body is the provider's and may
// quote what was sent.
func statusError(status int) error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return fmt.Errorf("%w (HTTP %d): check the key or token, and its permissions", ErrUnauthorized, status)
	}
	return fmt.Errorf("the provider's API answered HTTP %d", status)
}
