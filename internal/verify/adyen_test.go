package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vector of adyen-go-api-library's src/hmacvalidator/hmacvalidator_test.go:
// this item's signed fields under this key give this signature.
const (
	adyenDocKey       = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenDocSignature = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	adyenOtherKey     = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// adyenDocItem is that item as Adyen sends it in JSON.
func adyenDocItem() map[string]any {
	return map[string]any{
		"additionalData":      map[string]any{"hmacSignature": adyenDocSignature},
		"amount":              map[string]any{"currency": "EUR", "value": 1000},
		"eventCode":           "EVENT",
		"eventDate":           "1970-01-01T00:00:00+00:00",
		"merchantAccountCode": "merchantAccount",
		"merchantReference":   "reference",
		"originalReference":   "originalReference",
		"paymentMethod":       "VISA",
		"pspReference":        "pspReference",
		"reason":              "reason",
		"success":             "true",
	}
}

// adyenSignItem sets item's hmacSignature as Adyen computes it: base64
// HMAC-SHA256, keyed by the hex key, of the signed fields joined by ":".
func adyenSignItem(tb testing.TB, hexKey string, item map[string]any) map[string]any {
	tb.Helper()
	key, err := hex.DecodeString(hexKey)
	require.NoError(tb, err)
	amount, _ := item["amount"].(map[string]any)
	field := func(m map[string]any, k string) string {
		if v, ok := m[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	data := strings.Join([]string{
		field(item, "pspReference"), field(item, "originalReference"), field(item, "merchantAccountCode"),
		field(item, "merchantReference"), field(amount, "value"), field(amount, "currency"),
		field(item, "eventCode"), field(item, "success"),
	}, ":")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	add, _ := item["additionalData"].(map[string]any)
	if add == nil {
		add = map[string]any{}
		item["additionalData"] = add
	}
	add["hmacSignature"] = base64.StdEncoding.EncodeToString(m.Sum(nil))
	return item
}

// adyenBody wraps items in a notification body.
func adyenBody(tb testing.TB, items ...map[string]any) []byte {
	tb.Helper()
	wrapped := make([]any, len(items))
	for i, it := range items {
		wrapped[i] = map[string]any{"NotificationRequestItem": it}
	}
	b, err := json.Marshal(map[string]any{"live": "false", "notificationItems": wrapped})
	require.NoError(tb, err)
	return b
}

func TestAdyen(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "adyen", Secrets: [][]byte{[]byte(adyenOtherKey), []byte(adyenDocKey)}})
	require.NoError(t, err)

	doc := adyenBody(t, adyenDocItem())
	want := Event{ID: "pspReference:EVENT", Type: "EVENT", ObjectID: "pspReference"}
	auth := func(psp, code string) map[string]any {
		it := adyenDocItem()
		it["pspReference"], it["eventCode"] = psp, code
		return adyenSignItem(t, adyenDocKey, it)
	}
	capture := adyenBody(t, auth("8815329842815468", "CAPTURE"))
	tampered := adyenDocItem()
	tampered["merchantReference"] = "other"
	changedAmount := adyenDocItem()
	changedAmount["amount"] = map[string]any{"currency": "EUR", "value": 1}
	noSig := adyenDocItem()
	delete(noSig, "additionalData")
	badSig := adyenDocItem()
	badSig["additionalData"] = map[string]any{"hmacSignature": "not base64!"}
	noPSP := adyenDocItem()
	delete(noPSP, "pspReference")
	badPSP := adyenDocItem()
	badPSP["pspReference"] = "psp reference"
	noCode := adyenDocItem()
	delete(noCode, "eventCode")
	dupPSP := strings.Replace(string(adyenBody(t, auth("8815329842815468", "CAPTURE"))), `"pspReference":`, `"PSPREFERENCE":"x","pspReference":`, 1)

	runVerifyCases(t, v, []verifyCase{
		{name: "Adyen's own example", body: doc, header: http.Header{}, want: want},
		{name: "same PSP reference, another event code", body: capture, header: http.Header{}, want: Event{ID: "8815329842815468:CAPTURE", Type: "CAPTURE", ObjectID: "8815329842815468"}},
		{name: "unsigned fields may differ", body: adyenBody(t, func() map[string]any { it := adyenDocItem(); it["reason"] = "other"; return it }()), header: http.Header{}, want: want},

		{name: "wrong key", body: adyenBody(t, adyenSignItem(t, "00"+adyenDocKey[2:], adyenDocItem())), header: http.Header{}, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signed field changed", body: adyenBody(t, tampered), header: http.Header{}, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "amount changed", body: adyenBody(t, changedAmount), header: http.Header{}, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "no hmacSignature", body: adyenBody(t, noSig), header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "hmacSignature not base64", body: adyenBody(t, badSig), header: http.Header{}, wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "no items", body: []byte(`{"live":"false","notificationItems":[]}`), header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "not JSON", body: []byte(`pspReference=1`), header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "item not wrapped", body: []byte(`{"notificationItems":[{"pspReference":"1"}]}`), header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "one good item and one forged", body: adyenBody(t, adyenDocItem(), tampered), header: http.Header{}, wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "several items, all signed: refused, not half-claimed", body: adyenBody(t, adyenDocItem(), auth("8815329842815468", "CAPTURE")), header: http.Header{}, wantErr: ErrInvalid, reason: "multiple_items"},
		{name: "pspReference missing", body: adyenBody(t, adyenSignItem(t, adyenDocKey, noPSP)), header: http.Header{}, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "pspReference malformed", body: adyenBody(t, adyenSignItem(t, adyenDocKey, badPSP)), header: http.Header{}, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "eventCode missing", body: adyenBody(t, adyenSignItem(t, adyenDocKey, noCode)), header: http.Header{}, wantErr: ErrInvalid, reason: "missing_type"},
		{name: "pspReference twice", body: []byte(dupPSP), header: http.Header{}, wantErr: ErrInvalid, reason: "ambiguous_field"},
	}, adyenDocKey, adyenOtherKey)
}

func TestAdyenMultipleItemsMessage(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: "adyen", Secrets: [][]byte{[]byte(adyenDocKey)}})
	require.NoError(t, err)
	_, err = v.Verify(adyenBody(t, adyenDocItem(), adyenDocItem()), http.Header{}, testNow())
	require.EqualError(t, err, "body has 2 notification items; hookgate claims one per request, as Adyen sends them")
}

func TestAdyenKeyMustBeHex(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Scheme: "adyen", Secrets: [][]byte{[]byte("not-hex-key")}})
	require.EqualError(t, err, "secret 1 of 1 is not a hex HMAC key (as Adyen's Customer Area shows it)")
}
