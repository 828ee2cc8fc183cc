package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
)

// event is what route programs see of d as $event, and its predecessors'
// results for $results.
func event(d claim.Delivery) route.Event {
	ev := route.Event{Provider: d.Provider, ID: d.EventID, Type: d.EventType}
	if d.Results != nil {
		var results map[string]json.RawMessage
		if json.Unmarshal(d.Results, &results) == nil { // the database wrote it
			ev.Results = make(map[string][]byte, len(results))
			for name, r := range results {
				ev.Results[name] = r
			}
		}
	}
	return ev
}

// request builds what the contract says the worker sends downstream, as
// attempt number attempt: the route's shaped body (or the payload as it
// came), its static and secret headers, then hookgate's own. It returns
// the body too, for the attempt history.
func (w *Worker) request(ctx context.Context, r *routeRuntime, d claim.Delivery, attempt int) (*http.Request, []byte, error) {
	ev := event(d)
	body, contentType, err := r.Body(ctx, ev, d.Payload, d.ContentType)
	if err != nil {
		return nil, nil, err
	}
	target, err := r.Target(ctx, ev, d.Payload)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building the request for route %s: invalid URL", r.Name)
	}
	// Without GetBody the transport cannot rewind the body, so it never
	// sends the request again by itself: it would, on a reused connection
	// that closed before answering, for any request with an
	// Idempotency-Key. One attempt is at most one request.
	req.GetBody = nil
	key := d.Key().IdempotencyKey()
	h := req.Header
	for name, values := range r.Header() {
		h[name] = slices.Clone(values)
	}
	if contentType != "" {
		h.Set("Content-Type", headerValue(contentType))
	}
	if d.ContentEncoding != "" && !r.Shaped() {
		// The stored bytes are encoded so; they are forwarded as received.
		// A shaped body is JSON of hookgate's own, never encoded.
		h.Set("Content-Encoding", headerValue(d.ContentEncoding))
	}
	h.Set("User-Agent", "hookgate")
	h.Set(r.IdempotencyHeader, key)
	h.Set("Hookgate-Provider", d.Provider)
	h.Set("Hookgate-Event-Id", d.EventID)
	h.Set("Hookgate-Event-Type", headerValue(d.EventType))
	h.Set("Hookgate-Route", d.Route)
	h.Set("Hookgate-Attempt", strconv.Itoa(attempt))
	if wh := r.signer; wh != nil {
		ts := w.now()
		sig, err := wh.Sign(key, ts, body)
		if err != nil {
			return nil, nil, fmt.Errorf("signing for route %s: %w", r.Name, err)
		}
		h.Set(standardwebhooks.HeaderWebhookID, key)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	}
	return req, body, nil
}
