package verify

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// scopeSeparator joins a scope to the provider's event id. A scope may not
// contain it, so scope + ":" + id is split back at the first one, and two
// different (scope, id) pairs never make the same key.
const scopeSeparator = ":"

// scopedVerifier composes a scope into the event id of the Verifier it
// wraps: for providers whose ids are unique only per account or shop (a
// Stripe Connect platform's account, Adyen's merchantAccountCode, Shopify's
// shop domain). The scope is read only after the signature is verified,
// from a header or the body (where a segment of digits indexes an array,
// for Adyen's notificationItems.0.NotificationRequestItem.merchantAccountCode),
// and the composed id is what is claimed and what the downstream key is
// made of.
type scopedVerifier struct {
	inner Verifier
	from  source
	spec  string
}

// newScopedVerifier parses scope_from.
func newScopedVerifier(inner Verifier, spec string) (Verifier, error) {
	from, err := parseSource(spec)
	if err != nil {
		return nil, fmt.Errorf("scope_from %q %w", spec, err)
	}
	return &scopedVerifier{inner: inner, from: from, spec: spec}, nil
}

// Verify implements Verifier.
func (v *scopedVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	ev, err := v.inner.Verify(body, h, now)
	if err != nil {
		return Event{}, err
	}
	obj := ev.Body // the body as the scheme parsed it, when it did
	if v.from.jsonPath != "" {
		if obj == nil {
			if obj, err = parseObject(body); err != nil {
				return Event{}, err
			}
			ev.Body = obj // for the routes, which would parse it again
		}
		if err := checkUnambiguous(body, v.from.jsonPath); err != nil {
			return Event{}, err
		}
	}
	scope := fromHeader(h, v.from.header)
	if v.from.jsonPath != "" {
		scope = fromJSONPath(obj, v.from.jsonPath, true)
	}
	switch {
	case !scope.present:
		return Event{}, invalid(reasonMissingScope, "scope ("+v.spec+") is missing")
	case !scope.scalar || !ValidID(scope.text) || strings.Contains(scope.text, scopeSeparator):
		return Event{}, invalid(reasonMalformedScope, "scope ("+v.spec+") must be printable ASCII without spaces or "+scopeSeparator)
	}
	id := scope.text + scopeSeparator + ev.ID
	if !ValidID(id) {
		return Event{}, invalid(reasonMalformedID, "scope and event id together are longer than 255 characters")
	}
	ev.ID = id
	return ev, nil
}
