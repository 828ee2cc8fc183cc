package verify

import (
	"net/http"
	"strings"
	"time"
)

// paddleSignatureHeader holds "ts=<unix>;h1=<hex>[;h1=<hex>...]".
const paddleSignatureHeader = "Paddle-Signature"

// paddleVerifier verifies Paddle Billing webhooks
// (https://developer.paddle.com/webhooks/signature-verification):
// HMAC-SHA256 of ts + ":" + body, keyed by the notification destination's
// secret key (pdl_ntfset_...) as it is, in any h1 entry (Paddle sends
// several while a secret is rotated). The event is read from the body:
// event_id, event_type, and data.id as the ObjectID. The signature covers
// the body, so the id: no replay guard is needed.
type paddleVerifier struct {
	secrets   [][]byte
	tolerance time.Duration
}

// Verify implements Verifier. As for Stripe, the signature is checked
// before the timestamp's tolerance.
func (v *paddleVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	header := h.Get(paddleSignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+paddleSignatureHeader+" header")
	}
	t, ts, sigs, err := parsePaddleHeader(header)
	if err != nil {
		return Event{}, err
	}
	if !matchAny(v.secrets, sigs, []byte(t), []byte(":"), body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	if err := checkTolerance(ts, now, v.tolerance); err != nil {
		return Event{}, err
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, "event_id", "event_type"); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, "event_id"), fromJSON(obj, "event_type"), fromJSON(obj, "data.id")))(obj)
}

// parsePaddleHeader splits a Paddle-Signature value into its timestamp (as
// sent, and parsed) and its decodable h1 signatures, with the rules of
// parseStripeHeader: unknown keys are ignored, a repeated ts is refused,
// and at most maxSignatureEntries entries are looked at.
func parsePaddleHeader(header string) (t string, ts time.Time, sigs [][]byte, err error) {
	malformed := func(msg string) (string, time.Time, [][]byte, error) {
		return "", time.Time{}, nil, unauthorized(reasonMalformedSignature, paddleSignatureHeader+" header "+msg)
	}
	seenT, undecodable := false, false
	for _, entry := range splitBounded(header, ";", maxSignatureEntries) {
		key, val, ok := strings.Cut(entry, "=")
		if !ok || strings.Contains(val, "=") {
			return malformed("has an entry that is not key=value")
		}
		switch key {
		case "ts":
			if seenT {
				return malformed("has more than one timestamp")
			}
			seenT = true
			if ts, ok = parseUnix(val); !ok {
				return malformed("has a timestamp that is not unix seconds")
			}
			t = val
		case "h1":
			if sig, ok := decodeHexMAC(val); ok {
				sigs = append(sigs, sig)
			} else {
				undecodable = true
			}
		}
	}
	switch {
	case len(sigs) == 0 && undecodable:
		return malformed("has a malformed h1 signature (want 64 hex digits)")
	case !seenT:
		return malformed("has no timestamp")
	case len(sigs) == 0:
		return malformed("has no h1 signature")
	}
	return t, ts, sigs, nil
}
