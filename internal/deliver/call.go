package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
)

// The one downstream call of a job run, and how its answer is read.

// Body bytes read from a response: a short prefix for the attempt's
// response, then up to drainBytes more so the connection can be reused.
const (
	snippetBytes = 4 << 10
	drainBytes   = 64 << 10
)

// resultBytes bounds the answer a route's result program reads.
const resultBytes = 64 << 10

// call makes the one downstream request of this run and classifies its answer.
func (w *Worker) call(ctx context.Context, r *routeRuntime, d claim.Delivery, attempt int) callResult {
	timeout := r.Timeout.D()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, span := w.tracer.startDownstream(ctx, r.Route)
	o := w.send(ctx, r, d, attempt, timeout)
	w.redactResult(&o)
	endDownstream(span, o)
	return o
}

// send sends the request of call and classifies the answer.
func (w *Worker) send(ctx context.Context, r *routeRuntime, d claim.Delivery, attempt int, timeout time.Duration) callResult {
	req, body, err := w.request(ctx, r, d, attempt)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, route.ErrProgram) {
			o := classifyError(err, timeout) // cut short before the call
			o.unsent = true
			return o
		}
		return callResult{verdict: rejected, reason: bound(err.Error()), unsent: true}
	}
	w.tracer.inject(ctx, req.Header)
	sent := w.sentRequest(r.Route, req, body)
	resp, err := r.client.Do(req)
	answered := time.Now()
	if err != nil {
		o := classifyError(err, timeout)
		o.request, o.answered = sent, answered
		return o
	}
	defer resp.Body.Close()
	var o callResult
	if (r.HasResult() || r.HasSuccess()) && classifyStatus(resp.StatusCode).delivers() {
		o = w.answer(ctx, r.Route, d, resp)
	} else {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
		head = w.redactHead(head)
		o = classifyResponse(resp.StatusCode, resp.Header, w.now(), r.RetryStatuses...)
		o.response = responseText(head)
	}
	o.request, o.responseHeaders, o.answered = sent, w.answerHeaders(resp.Header), answered
	return o
}

// answer reads a 2xx answer (up to resultBytes) for the route's success
// and result programs. The success program decides whether the attempt
// delivered (see judge); a result that cannot be computed leaves the
// outcome delivered, with resultErr saying why.
func (w *Worker) answer(ctx context.Context, r *route.Route, d claim.Delivery, resp *http.Response) callResult {
	o := callResult{verdict: delivered, status: resp.StatusCode}
	body, err := io.ReadAll(io.LimitReader(resp.Body, resultBytes+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	o.response = responseText(w.redactHead(body[:min(len(body), snippetBytes)]))
	if r.HasSuccess() {
		ok := false
		if err == nil {
			ok, o.successErr = r.Succeeded(ctx, event(d), resp.StatusCode, resp.Header, body[:min(len(body), route.MaxSuccessBytes)])
		} else {
			o.successErr = fmt.Errorf("reading the response: %s", describe(err, r.Timeout.D()))
		}
		if o.verdict = judge(resp.StatusCode, r.RetryStatuses, ok); !o.verdict.delivers() {
			o.reason = notSatisfied
			return o
		}
	}
	if !r.HasResult() {
		return o
	}
	switch {
	case err != nil:
		o.resultErr = fmt.Errorf("result: reading the response: %s", describe(err, r.Timeout.D()))
	case len(body) > resultBytes:
		o.resultErr = fmt.Errorf("result: the response is over %d KiB", resultBytes>>10)
	default:
		o.result, o.resultErr = r.Result(ctx, event(d), body)
	}
	return o
}
