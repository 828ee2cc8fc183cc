package verify

import (
	"net/http"
	"strings"
	"time"
)

// stripeSignatureHeader holds "t=<unix>,v1=<hex>[,v1=<hex>...]".
const stripeSignatureHeader = "Stripe-Signature"

// stripeVerifier verifies Stripe webhooks: HMAC-SHA256 of t + "." + body,
// keyed by the whsec_... secret string as is, in any v1 entry. The event is
// read from the body: id, type, and data.object.id as the ObjectID.
type stripeVerifier struct {
	secrets   [][]byte
	tolerance time.Duration
}

// Verify implements Verifier. The signature is checked before the timestamp
// so that timestamp_out_of_tolerance counts genuine but stale (or
// clock-skewed) deliveries, not forgeries. Unlike stripe-go, which only
// rejects old timestamps, it also rejects ones too far in the future.
func (v *stripeVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	header := h.Get(stripeSignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+stripeSignatureHeader+" header")
	}
	t, ts, sigs, err := parseStripeHeader(header)
	if err != nil {
		return Event{}, err
	}
	if !matchAny(v.secrets, sigs, []byte(t), []byte("."), body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	if err := checkTolerance(ts, now, v.tolerance); err != nil {
		return Event{}, err
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, "id", "type"); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, "id"), fromJSON(obj, "type"), fromJSON(obj, "data.object.id")))(obj)
}

// parseStripeHeader splits a Stripe-Signature value into its timestamp (as
// sent, and parsed) and its decodable v1 signatures. Like stripe-go it
// ignores unknown keys (v0) and v1 values that are not hex beside one that
// is (a header with only such values is called malformed), and refuses an
// entry that is not exactly key=value; unlike it, it refuses a repeated t
// (stripe-go silently keeps the last) and looks at no more than
// maxSignatureEntries entries.
func parseStripeHeader(header string) (t string, ts time.Time, sigs [][]byte, err error) {
	malformed := func(msg string) (string, time.Time, [][]byte, error) {
		return "", time.Time{}, nil, unauthorized(reasonMalformedSignature, stripeSignatureHeader+" header "+msg)
	}
	seenT, undecodable := false, false
	for _, entry := range splitBounded(header, ",", maxSignatureEntries) {
		key, val, ok := strings.Cut(entry, "=")
		if !ok || strings.Contains(val, "=") {
			return malformed("has an entry that is not key=value")
		}
		switch key {
		case "t":
			if seenT {
				return malformed("has more than one timestamp")
			}
			seenT = true
			if ts, ok = parseUnix(val); !ok {
				return malformed("has a timestamp that is not unix seconds")
			}
			t = val
		case "v1":
			if sig, ok := decodeHexMAC(val); ok {
				sigs = append(sigs, sig)
			} else {
				undecodable = true
			}
		}
	}
	switch {
	case len(sigs) == 0 && undecodable:
		return malformed("has a malformed v1 signature (want 64 hex digits)")
	case !seenT:
		return malformed("has no timestamp")
	case len(sigs) == 0:
		return malformed("has no v1 signature")
	}
	return t, ts, sigs, nil
}
