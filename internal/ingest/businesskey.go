package ingest

import (
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/route"
)

// businessKeys computes a verified event's business key for each of routes
// that has one, from in, whose body is parsed once for filters and keys
// alike. A key that cannot be computed is handed on as missing, so that its
// delivery fails naming the field rather than being sent without its key or
// silently dropped.
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
