package verify

import (
	"errors"
	"net/http"
	"net/url"
	"time"
)

// squareSignatureHeader holds the base64 HMAC-SHA256 of URL + body.
const squareSignatureHeader = "X-Square-Hmacsha256-Signature"

// squareVerifier verifies Square webhooks
// (https://developer.squareup.com/docs/webhooks-api/validate-notifications): base64
// HMAC-SHA256 of the notification URL, exactly as configured in Square,
// followed by the body, keyed by the subscription's signature key as it
// is. Square signs no timestamp. The event is read from the body:
// event_id, type, and data.id as the ObjectID; the signature covers the
// body, so the id. (The older X-Square-Signature, HMAC-SHA1, is not
// accepted.)
type squareVerifier struct {
	secrets [][]byte
	url     []byte
}

// newSquareVerifier checks the notification URL.
func newSquareVerifier(c Config, secrets [][]byte) (*squareVerifier, error) {
	if c.NotificationURL == "" {
		return nil, errors.New("notification_url is required for scheme square (the URL exactly as configured in Square)")
	}
	if u, err := url.Parse(c.NotificationURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("notification_url must be an absolute http or https URL")
	}
	return &squareVerifier{secrets: secrets, url: []byte(c.NotificationURL)}, nil
}

// Verify implements Verifier.
func (v *squareVerifier) Verify(body []byte, h http.Header, _ time.Time) (Event, error) {
	header := h.Get(squareSignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+squareSignatureHeader+" header")
	}
	sig, ok := decodeBase64MAC(header)
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, squareSignatureHeader+" header is not a base64 SHA-256 HMAC")
	}
	if !matchAny(v.secrets, [][]byte{sig}, v.url, body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, "event_id", "type"); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, "event_id"), fromJSON(obj, "type"), fromJSON(obj, "data.id")))(obj)
}
