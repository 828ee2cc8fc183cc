package ingest

import (
	"net/http"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// businessKeys computes a verified event's business key for each of routes
// that has one. The body is parsed once however many routes read it, and
// not at all when none does. A key that cannot be computed is handed on as
// missing, so that its delivery fails naming the field rather than being
// sent without its key or silently dropped.
func businessKeys(routes []config.Route, eventType string, h http.Header, body []byte) []claim.BusinessKey {
	var keys []claim.BusinessKey
	in := &config.KeyInput{Type: eventType, Header: h, Body: body}
	for _, r := range routes {
		if len(r.BusinessKey) == 0 {
			continue
		}
		k, err := r.BusinessKeyOf(in)
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
func after(routes []config.Route) map[string][]string {
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
