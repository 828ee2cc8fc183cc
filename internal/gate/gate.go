// Package gate turns a verified event and the routes that take it into
// the claim request: the one rule every door into the claim shares, a
// webhook through ingest and an event reconciliation fetched from the
// provider's API, so that both claim the same key, fan out to the same
// routes, hold the same business keys and wait in the same chains.
package gate

import (
	"context"
	"net/http"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
)

// Request returns the claim request of ev, a verified event whose routes
// (from route.Table.Match over in) are routes: their names, the event's
// business key for each that has one, computed from in, and the routes
// each waits for. A key that cannot be computed is handed on as missing,
// so that its delivery fails naming the field rather than being sent
// without its key or silently dropped.
func Request(ev claim.Event, routes []*route.Route, in *route.Input) claim.Request {
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Name
	}
	ev.BusinessKeys = businessKeys(routes, in)
	ev.After = after(routes)
	return claim.Request{Event: ev, Routes: names}
}

// Match returns the claim request of ev, verified, with its body parsed as
// body (nil when not parsed yet) and headers h, for the routes of table
// that take it, and the routes whose filter did not (see
// route.Table.Match).
func Match(ctx context.Context, table *route.Table, ev claim.Event, h http.Header, body map[string]any) (claim.Request, []route.Unmatched) {
	in := route.NewInput(route.Event{Provider: ev.Provider, ID: ev.ID, Type: ev.Type}, h, ev.Payload, body)
	routes, unmatched := table.Match(ctx, in)
	return Request(ev, routes, in), unmatched
}

// businessKeys computes the event's business key for each of routes that
// has one, from in, whose body is parsed once for filters and keys alike.
func businessKeys(routes []*route.Route, in *route.Input) []claim.BusinessKey {
	var keys []claim.BusinessKey
	for _, r := range routes {
		if !r.HasBusinessKey() {
			continue
		}
		k, err := r.BusinessKey(in)
		if err != nil {
			keys = append(keys, claim.BusinessKey{Route: r.Name, Missing: err.Error()})
			continue
		}
		keys = append(keys, claim.BusinessKey{Route: r.Name, Key: k})
	}
	return keys
}

// after returns, for each of routes that runs after others, the routes it
// names (claim.Event.After); nil when none does.
func after(routes []*route.Route) map[string][]string {
	var m map[string][]string
	for _, r := range routes {
		if len(r.After) == 0 {
			continue
		}
		if m == nil {
			m = map[string][]string{}
		}
		m[r.Name] = r.After
	}
	return m
}
