package verify

import (
	"net/http"
	"strings"
	"time"
)

// timestampedScheme is a scheme that signs timestamp + joiner + body with
// HMAC-SHA256 and sends "<ts>=<unix><sep><sig>=<hex>[<sep><sig>=<hex>...]"
// in one header, as Stripe and Paddle do; the event comes from the body.
type timestampedScheme struct {
	header              string // the signature header's name
	sep, tsKey, sigKey  string // the entry separator and the two keys
	joiner              string // between the timestamp and the body
	idAt, typeAt, objAt string // dotted paths in the body
}

// The two schemes' signature headers.
const (
	stripeSignatureHeader = "Stripe-Signature" // "t=<unix>,v1=<hex>[,v1=<hex>...]"
	paddleSignatureHeader = "Paddle-Signature" // "ts=<unix>;h1=<hex>[;h1=<hex>...]"
)

var (
	// stripeScheme: HMAC-SHA256 of t + "." + body, keyed by the whsec_...
	// secret string as is, in any v1 entry; id, type, and data.object.id as
	// the ObjectID. Unlike stripe-go, which only rejects old timestamps, the
	// tolerance also rejects ones too far in the future.
	stripeScheme = &timestampedScheme{header: stripeSignatureHeader, sep: ",", tsKey: "t", sigKey: "v1",
		joiner: ".", idAt: "id", typeAt: "type", objAt: "data.object.id"}
	// paddleScheme: Paddle Billing
	// (https://developer.paddle.com/webhooks/signature-verification):
	// HMAC-SHA256 of ts + ":" + body, keyed by the notification
	// destination's secret key (pdl_ntfset_...) as it is, in any h1 entry
	// (Paddle sends several while a secret is rotated); event_id,
	// event_type, and data.id as the ObjectID. The signature covers the
	// body, so the id: no replay guard is needed.
	paddleScheme = &timestampedScheme{header: paddleSignatureHeader, sep: ";", tsKey: "ts", sigKey: "h1",
		joiner: ":", idAt: "event_id", typeAt: "event_type", objAt: "data.id"}
)

// timestampedVerifier verifies one timestampedScheme with its secrets.
type timestampedVerifier struct {
	scheme    *timestampedScheme
	secrets   [][]byte
	tolerance time.Duration
}

// Verify implements Verifier. The signature is checked before the timestamp
// so that timestamp_out_of_tolerance counts genuine but stale (or
// clock-skewed) deliveries, not forgeries.
func (v *timestampedVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	s := v.scheme
	header := h.Get(s.header)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+s.header+" header")
	}
	t, ts, sigs, err := s.parseHeader(header)
	if err != nil {
		return Event{}, err
	}
	if !matchAny(v.secrets, sigs, []byte(t), []byte(s.joiner), body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	if err := checkTolerance(ts, now, v.tolerance); err != nil {
		return Event{}, err
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, s.idAt, s.typeAt); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, s.idAt), fromJSON(obj, s.typeAt), fromJSON(obj, s.objAt)))(obj)
}

// parseHeader splits a signature header's value into its timestamp (as
// sent, and parsed) and its decodable signatures. Like stripe-go it ignores
// unknown keys (Stripe's v0) and signatures that are not hex beside one that
// is (a header with only such values is called malformed), and refuses an
// entry that is not exactly key=value; unlike it, it refuses a repeated
// timestamp (stripe-go silently keeps the last) and looks at no more than
// maxSignatureEntries entries.
func (s *timestampedScheme) parseHeader(header string) (t string, ts time.Time, sigs [][]byte, err error) {
	malformed := func(msg string) (string, time.Time, [][]byte, error) {
		return "", time.Time{}, nil, unauthorized(reasonMalformedSignature, s.header+" header "+msg)
	}
	seenT, undecodable := false, false
	for _, entry := range splitBounded(header, s.sep, maxSignatureEntries) {
		key, val, ok := strings.Cut(entry, "=")
		if !ok || strings.Contains(val, "=") {
			return malformed("has an entry that is not key=value")
		}
		switch key {
		case s.tsKey:
			if seenT {
				return malformed("has more than one timestamp")
			}
			seenT = true
			if ts, ok = parseUnix(val); !ok {
				return malformed("has a timestamp that is not unix seconds")
			}
			t = val
		case s.sigKey:
			if sig, ok := decodeHexMAC(val); ok {
				sigs = append(sigs, sig)
			} else {
				undecodable = true
			}
		}
	}
	switch {
	case len(sigs) == 0 && undecodable:
		return malformed("has a malformed " + s.sigKey + " signature (want 64 hex digits)")
	case !seenT:
		return malformed("has no timestamp")
	case len(sigs) == 0:
		return malformed("has no " + s.sigKey + " signature")
	}
	return t, ts, sigs, nil
}
