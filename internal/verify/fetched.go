package verify

import (
	"fmt"
	"net/http"
	"time"
)

// Fetched returns the normalized event of body, an event that the
// provider's own API returned to a request made with the provider's key
// (reconciliation), rather than a webhook: there is no signature to check,
// and the rest is what Verify does for the scheme (the same id, type,
// object id and scope_from), so that the event is claimed under the key
// its webhook copy has. Only the stripe scheme has such an API here; a
// scope read from a header cannot be (a fetched event has none) and is
// ErrInvalid.
func Fetched(c Config, body []byte) (Event, error) {
	if c.Scheme != schemeStripe {
		return Event{}, fmt.Errorf("scheme %q has no fetched events", c.Scheme)
	}
	var v Verifier = fetchedVerifier{scheme: stripeScheme}
	if c.ScopeFrom != "" {
		var err error
		if v, err = newScopedVerifier(v, c.ScopeFrom); err != nil {
			return Event{}, err
		}
	}
	return v.Verify(body, http.Header{}, time.Time{})
}

// fetchedVerifier normalizes a timestampedScheme's body with no signature.
type fetchedVerifier struct{ scheme *timestampedScheme }

// Verify implements Verifier for a fetched event: as
// timestampedVerifier.Verify once the signature and timestamp have passed.
func (v fetchedVerifier) Verify(body []byte, _ http.Header, _ time.Time) (Event, error) {
	s := v.scheme
	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, s.idAt, s.typeAt); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, s.idAt), fromJSON(obj, s.typeAt), fromJSON(obj, s.objAt)))(obj)
}
