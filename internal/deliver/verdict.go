package deliver

import (
	"net/http"
	"slices"
)

// verdict is what one attempt's answer means for its delivery.
type verdict int

const (
	// delivered: a 2xx; the delivery is completed.
	delivered verdict = iota + 1
	// retryable: worth another attempt (408, 409, 425, 429, 5xx, a 4xx in
	// the route's retry_statuses, timeout, connection error) while attempts
	// remain.
	retryable
	// rejected: no attempt will do better (any other 4xx, a redirect); the
	// delivery fails at once.
	rejected
)

func (v verdict) String() string {
	switch v {
	case delivered:
		return "delivered"
	case retryable:
		return "retryable"
	case rejected:
		return "rejected"
	}
	return "unknown"
}

// classifyStatus maps a downstream HTTP status to a verdict, per the contract.
func classifyStatus(code int) verdict {
	switch {
	case code >= 200 && code <= 299:
		return delivered
	case code == http.StatusRequestTimeout, code == http.StatusConflict,
		code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		return retryable
	case code >= 300 && code <= 499:
		// 3xx: redirects are not followed (the route's URL is the contract
		// with the downstream, and a redirect could leak the payload
		// elsewhere); other 4xx: the request itself is refused.
		return rejected
	default:
		// 5xx, and anything outside the standard ranges.
		return retryable
	}
}

// notSatisfied is the reason of a 2xx answer the route's success program
// did not accept. It quotes nothing of the answer.
const notSatisfied = "answer did not satisfy success"

// judge is the one answer to "did this attempt deliver?": retries (Work),
// the attempt history and last_error (the completer), the circuit breaker
// and the metrics all read its verdict, so they can never disagree.
//
//   - code 0 (no answer: a connection error or a timeout), 5xx, 408, 409,
//     425, 429, a 4xx in retry (the route's retry_statuses), and a 2xx
//     the route's success program did not accept (succeeded false):
//     retryable, the attempt did not deliver and counts against the
//     route's breaker.
//   - any other 4xx, a redirect: rejected, the delivery fails for good; it
//     neither counts against the breaker nor resets its count.
//   - a 2xx that succeeded (true when the route has no success program):
//     delivered.
func judge(code int, retry []int, succeeded bool) verdict {
	if code == 0 {
		return retryable
	}
	v := classifyStatus(code)
	switch {
	case v == rejected && slices.Contains(retry, code):
		return retryable
	case v == delivered && !succeeded:
		return retryable
	}
	return v
}

// delivers reports whether the attempt delivered: the delivery completes
// and the route's breaker closes (or stays closed, its count reset).
func (v verdict) delivers() bool { return v == delivered }

// retries reports whether the attempt did not deliver but another may:
// backoff and max_attempts apply, and it counts against the breaker.
func (v verdict) retries() bool { return v == retryable }

// permanent reports whether the delivery fails for good without another
// attempt; the breaker ignores it.
func (v verdict) permanent() bool { return v == rejected }

// breakerFailure reports whether the attempt counts as a failure for the
// route's circuit breaker: exactly the attempts that did not deliver and
// would be retried.
func (v verdict) breakerFailure() bool { return v.retries() }
