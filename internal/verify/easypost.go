package verify

import (
	"net/http"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// easyPostSignatureHeader holds "hmac-sha256-hex=<hex>".
const (
	easyPostSignatureHeader = "X-Hmac-Signature"
	easyPostPrefix          = "hmac-sha256-hex="
)

// easyPostVerifier verifies EasyPost webhooks
// (EasyPost's webhooks guide, and ValidateWebhook in easypost-go): "hmac-sha256-hex="
// followed by the hex HMAC-SHA256 of the body, keyed by the webhook
// secret NFKD-normalized, as EasyPost's client libraries do (so "sécret"
// typed with a precomposed é and with a combining accent are one key).
// EasyPost signs no timestamp. The event is read from the body: id, and
// description as the type (e.g. "tracker.updated"); result.id is the
// ObjectID. The signature covers the body, so the id.
type easyPostVerifier struct {
	secrets [][]byte
}

// newEasyPostVerifier normalizes each secret.
func newEasyPostVerifier(secrets [][]byte) *easyPostVerifier {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = norm.NFKD.Bytes(s)
	}
	return &easyPostVerifier{secrets: keys}
}

// Verify implements Verifier. The prefix is compared without regard to
// case, as EasyPost's libraries compare the whole value.
func (v *easyPostVerifier) Verify(body []byte, h http.Header, _ time.Time) (Event, error) {
	header := h.Get(easyPostSignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+easyPostSignatureHeader+" header")
	}
	if len(header) < len(easyPostPrefix) || !strings.EqualFold(header[:len(easyPostPrefix)], easyPostPrefix) {
		return Event{}, unauthorized(reasonMalformedSignature, easyPostSignatureHeader+` header does not start with "`+easyPostPrefix+`"`)
	}
	sig, ok := decodeHexMAC(header[len(easyPostPrefix):])
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, easyPostSignatureHeader+" header is not a hex SHA-256 HMAC")
	}
	if !matchAny(v.secrets, [][]byte{sig}, body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, "id", "description"); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, "id"), fromJSON(obj, "description"), fromJSON(obj, "result.id")))(obj)
}
