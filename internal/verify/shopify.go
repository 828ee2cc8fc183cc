package verify

import (
	"net/http"
	"time"
)

// Shopify's delivery headers.
const (
	shopifySignatureHeader = "X-Shopify-Hmac-Sha256"
	shopifyEventIDHeader   = "X-Shopify-Event-Id"
	shopifyWebhookIDHeader = "X-Shopify-Webhook-Id"
	shopifyTopicHeader     = "X-Shopify-Topic"
)

// shopifyVerifier verifies Shopify webhooks: base64 HMAC-SHA256 of the body.
// The id is X-Shopify-Event-Id, which is the same for every subscription
// that receives the event, falling back to the per-delivery
// X-Shopify-Webhook-Id for older API versions that lack it. The type is
// X-Shopify-Topic. ObjectID is the body's top-level id (the order, product,
// ... the topic is about), kept as written so 64-bit ids are not rounded; a
// body that is not JSON just leaves it empty, since nothing required is read
// from the body.
type shopifyVerifier struct {
	secrets [][]byte
}

// Verify implements Verifier.
func (v *shopifyVerifier) Verify(body []byte, h http.Header, _ time.Time) (Event, error) {
	header := h.Get(shopifySignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+shopifySignatureHeader+" header")
	}
	sig, ok := decodeBase64MAC(header)
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, shopifySignatureHeader+" header is not a base64 SHA-256 HMAC")
	}
	if !matchAny(v.secrets, [][]byte{sig}, body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}

	id := fromHeader(h, shopifyEventIDHeader)
	if !id.present {
		id = fromHeader(h, shopifyWebhookIDHeader)
	}
	ev, err := normalize(id, fromHeader(h, shopifyTopicHeader), value{})
	if err != nil {
		return Event{}, err
	}
	if obj, err := parseObject(body); err == nil {
		ev.ObjectID = fromJSON(obj, "id").optional()
		ev.Body = obj
	}
	return ev, nil
}
