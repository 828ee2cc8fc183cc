package verify

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vector of easypost-go's TestValidateWebhook: this body, signed by
// EasyPost with the secret "sécret" (precomposed é), whose NFKD form
// (e + combining acute) is the HMAC key.
const (
	easyPostDocSecret    = "s\u00e9cret"
	easyPostDocSignature = "hmac-sha256-hex=e93977c8ccb20363d51a62b3fe1fc402b7829be1152da9e88cf9e8d07115a46b"
	easyPostDocBody      = `{"result":{"id":"batch_123...","object":"Batch","mode":"test","state":"created","num_shipments":0,"reference":null,"created_at":"2022-07-26T17:22:32Z","updated_at":"2022-07-26T17:22:32Z","scan_form":null,"shipments":[],"status":{"created":0,"queued_for_purchase":0,"creation_failed":0,"postage_purchased":0,"postage_purchase_failed":0},"pickup":null,"label_url":null},"description":"batch.created","mode":"test","previous_attributes":null,"completed_urls":null,"user_id":"user_123...","status":"pending","object":"Event","id":"evt_123..."}`
)

func TestEasyPost(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "easypost", Secrets: [][]byte{[]byte(easyPostDocSecret)}})
	require.NoError(t, err)
	decomposed, err := New(Config{Scheme: "easypost", Secrets: [][]byte{[]byte("se\u0301cret")}})
	require.NoError(t, err)

	body := []byte(easyPostDocBody)
	want := Event{ID: "evt_123...", Type: "batch.created", ObjectID: "batch_123..."}
	key := "se\u0301cret"
	signed := func(b string) (body []byte, h http.Header) {
		return []byte(b), headers(easyPostSignatureHeader, easyPostPrefix+macHex(key, b))
	}
	noID, noIDHeader := signed(`{"description":"tracker.updated","result":{"id":"trk_1"}}`)
	badID, badIDHeader := signed(`{"id":"evt 1","description":"tracker.updated"}`)
	noType, noTypeHeader := signed(`{"id":"evt_1"}`)
	hexSig := strings.TrimPrefix(easyPostDocSignature, easyPostPrefix)

	cases := []verifyCase{
		{name: "EasyPost's own example", body: body, header: headers(easyPostSignatureHeader, easyPostDocSignature), want: want},
		{name: "prefix in upper case", body: body, header: headers(easyPostSignatureHeader, "HMAC-SHA256-HEX="+hexSig), want: want},
		{name: "upper-case hex", body: body, header: headers(easyPostSignatureHeader, easyPostPrefix+strings.ToUpper(hexSig)), want: want},

		{name: "keyed by the secret as typed, not normalized", body: body, header: headers(easyPostSignatureHeader, easyPostPrefix+macHex(easyPostDocSecret, easyPostDocBody)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "wrong secret", body: body, header: headers(easyPostSignatureHeader, easyPostPrefix+macHex("secret", easyPostDocBody)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "body changed", body: flipByte(body, 20), header: headers(easyPostSignatureHeader, easyPostDocSignature), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "no prefix", body: body, header: headers(easyPostSignatureHeader, hexSig), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "not hex", body: body, header: headers(easyPostSignatureHeader, easyPostPrefix+strings.Repeat("g", 64)), wantErr: ErrUnauthorized, reason: "malformed_signature"},

		{name: "id missing", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id malformed", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "description missing", body: noType, header: noTypeHeader, wantErr: ErrInvalid, reason: "missing_type"},
	}
	runVerifyCases(t, v, cases, easyPostDocSecret)
	// A secret written decomposed is the same key.
	runVerifyCases(t, decomposed, cases[:1], key)
}
