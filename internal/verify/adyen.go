package verify

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// adyenSignedFields are the NotificationRequestItem fields Adyen's HMAC
// covers, in order, joined by ":"
// (https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures).
var adyenSignedFields = []string{
	"pspReference", "originalReference", "merchantAccountCode", "merchantReference",
	"amount.value", "amount.currency", "eventCode", "success",
}

// adyenVerifier verifies Adyen standard webhooks: each item of the body's
// notificationItems array wraps a NotificationRequestItem whose
// additionalData.hmacSignature is the base64 HMAC-SHA256, keyed by the
// hex-decoded HMAC key, of the adyenSignedFields joined by ":" (a missing
// field is empty; amount.value keeps its JSON spelling).
//
// The signature is inside the body, so the body is parsed before it is
// verified: an unauthenticated request costs one JSON decode, bounded by
// max_body_bytes. The signature covers those fields only, not the rest of
// the body (additionalData, reason, eventDate): what the downstream reads
// outside them is as trustworthy as the transport.
//
// The id is pspReference + ":" + eventCode, since Adyen reuses one PSP
// reference across the events of a payment (AUTHORISATION, CAPTURE,
// REFUND...); the type is eventCode and the ObjectID pspReference. Both
// are signed, so no replay guard is needed.
//
// Adyen sends one item per request. A request with several is refused
// (ErrInvalid, reason multiple_items) once every item's signature has been
// checked: claiming one of them would drop the others silently, and
// claiming each under its own key would make one request several claims
// that one answer cannot acknowledge separately.
type adyenVerifier struct {
	keys [][]byte
}

// newAdyenVerifier decodes each hex HMAC key.
func newAdyenVerifier(secrets [][]byte) (*adyenVerifier, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		key, err := hex.DecodeString(strings.TrimSpace(string(s)))
		if err != nil || len(key) == 0 {
			// The decoder's error is left out: it quotes a byte of the key.
			return nil, fmt.Errorf("secret %d of %d is not a hex HMAC key (as Adyen's Customer Area shows it)", i+1, len(secrets))
		}
		keys[i] = key
	}
	return &adyenVerifier{keys: keys}, nil
}

// Verify implements Verifier.
func (v *adyenVerifier) Verify(body []byte, _ http.Header, _ time.Time) (Event, error) {
	obj, err := parseObject(body)
	if err != nil {
		return Event{}, unauthorized(reasonMissingSignature, "body is not an Adyen notification (a JSON object with notificationItems)")
	}
	list, _ := obj["notificationItems"].([]any)
	if len(list) == 0 {
		return Event{}, unauthorized(reasonMissingSignature, "body has no notificationItems to verify")
	}
	items := make([]map[string]any, len(list))
	for i, raw := range list {
		wrapper, _ := raw.(map[string]any)
		item, _ := wrapper["NotificationRequestItem"].(map[string]any)
		if item == nil {
			return Event{}, unauthorized(reasonMissingSignature, "a notification item has no NotificationRequestItem")
		}
		if err := v.verifyItem(item); err != nil {
			return Event{}, err
		}
		items[i] = item
	}
	if len(items) > 1 {
		return Event{}, invalid(reasonMultipleItems, fmt.Sprintf("body has %d notification items; hookgate claims one per request, as Adyen sends them", len(items)))
	}
	prefix := "notificationItems.[].NotificationRequestItem."
	if err := checkUnambiguous(body, "notificationItems", prefix+"pspReference", prefix+"eventCode",
		prefix+"originalReference", prefix+"merchantAccountCode", prefix+"merchantReference",
		prefix+"amount.value", prefix+"amount.currency", prefix+"success", prefix+"additionalData.hmacSignature"); err != nil {
		return Event{}, err
	}

	item := items[0]
	psp, code := fromJSON(item, "pspReference"), fromJSON(item, "eventCode")
	if err := checkID(psp); err != nil {
		return Event{}, err
	}
	if err := checkType(code); err != nil {
		return Event{}, err
	}
	return withBody(normalize(value{text: psp.text + ":" + code.text, present: true, scalar: true}, code, psp))(obj)
}

// verifyItem checks one NotificationRequestItem's hmacSignature.
func (v *adyenVerifier) verifyItem(item map[string]any) error {
	sigText := fromJSON(item, "additionalData.hmacSignature")
	if !sigText.present {
		return unauthorized(reasonMissingSignature, "notification item has no additionalData.hmacSignature")
	}
	sig, ok := decodeBase64MAC(sigText.text)
	if !sigText.scalar || !ok {
		return unauthorized(reasonMalformedSignature, "additionalData.hmacSignature is not a base64 SHA-256 HMAC")
	}
	if !matchAny(v.keys, [][]byte{sig}, []byte(adyenSignedString(item))) {
		return unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	return nil
}

// adyenSignedString joins the signed fields of item. A boolean success
// (Adyen sends a string) is spelled as JSON spells it.
func adyenSignedString(item map[string]any) string {
	parts := make([]string, len(adyenSignedFields))
	for i, f := range adyenSignedFields {
		parts[i] = fromJSON(item, f).text
		if f == "success" {
			if b, ok := item[f].(bool); ok {
				parts[i] = fmt.Sprint(b)
			}
		}
	}
	return strings.Join(parts, ":")
}
