package verify

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	acmeSecret        = "acme-signing-key-71c9e2"
	acmeSecretRotated = "acme-signing-key-rotated-5b0d"
	acmeSecretOther   = "not-acme"
)

// TestHMACHexHeaderID covers a sender that signs the body alone, hex with a
// prefix, with the id in a header and the type in the body.
func TestHMACHexHeaderID(t *testing.T) {
	t.Parallel()

	v, err := New(Config{
		Scheme:   "hmac",
		Secrets:  [][]byte{[]byte(acmeSecret), []byte(acmeSecretRotated)},
		Header:   "X-Acme-Signature",
		Prefix:   "sha256=",
		Encoding: "hex",
		IDFrom:   "header:X-Acme-Delivery",
		TypeFrom: "json:event.name",
	})
	require.NoError(t, err)

	body := []byte("{\"event\":{\"name\":\"shipment.created\",\"at\":\"2024-07-16T18:03:32Z\"},\n \"shipment\": {\"id\": 98765, \"to\": \"Z\\u00fcrich\"}}\n")
	request := func(b []byte, secret string, kv ...string) http.Header {
		h := headers("X-Acme-Signature", "sha256="+macHex(secret, string(b)), "X-Acme-Delivery", "dlv_01J2XKQ7")
		return with(h, kv...)
	}
	want := Event{ID: "dlv_01J2XKQ7", Type: "shipment.created"}
	noType := []byte(`{"event":{}}`)
	typeObject := []byte(`{"event":{"name":{"en":"created"}}}`)
	notJSON := []byte(`event=shipment.created`)

	runVerifyCases(t, v, []verifyCase{
		{name: "valid", body: body, header: request(body, acmeSecret), want: want},
		{name: "rotated second secret", body: body, header: request(body, acmeSecretRotated), want: want},
		{name: "wrong secret", body: body, header: request(body, acmeSecretOther), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: request(body, acmeSecret, "X-Acme-Signature", ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "missing prefix", body: body, header: request(body, acmeSecret, "X-Acme-Signature", macHex(acmeSecret, string(body))), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "base64 instead of hex", body: body, header: request(body, acmeSecret, "X-Acme-Signature", "sha256="+macBase64(acmeSecret, string(body))), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "re-serialized body", body: reserialized(t, body), header: request(body, acmeSecret), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, 3), header: request(body, acmeSecret), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "id header missing", body: body, header: request(body, acmeSecret, "X-Acme-Delivery", ""), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id header malformed", body: body, header: request(body, acmeSecret, "X-Acme-Delivery", strings.Repeat("d", 256)), wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "type missing", body: noType, header: request(noType, acmeSecret), wantErr: ErrInvalid, reason: "missing_type"},
		{name: "type an object", body: typeObject, header: request(typeObject, acmeSecret), wantErr: ErrInvalid, reason: "malformed_type"},
		{name: "body not JSON", body: notJSON, header: request(notJSON, acmeSecret), wantErr: ErrInvalid, reason: "unparsable_body"},
	}, acmeSecret, acmeSecretRotated)
}

// TestHMACTimestampJSONID covers a sender that signs timestamp + "." + body
// in base64 without a prefix, with the id in the body and no type.
func TestHMACTimestampJSONID(t *testing.T) {
	t.Parallel()

	v, err := New(Config{
		Scheme:          "hmac",
		Secrets:         [][]byte{[]byte(acmeSecret)},
		Header:          "X-Acme-Signature",
		Encoding:        "base64",
		IDFrom:          "json:meta.delivery_id",
		TimestampHeader: "X-Acme-Timestamp",
		Tolerance:       2 * time.Minute,
	})
	require.NoError(t, err)

	now := testNow()
	body := []byte(`{ "meta" : { "delivery_id" : 9007199254740993 }, "note": "na\u00efve" }`)
	request := func(b []byte, secret string, ts time.Time) http.Header {
		t := strconv.FormatInt(ts.Unix(), 10)
		return headers("X-Acme-Signature", macBase64(secret, t, ".", string(b)), "X-Acme-Timestamp", t)
	}
	valid := request(body, acmeSecret, now)
	want := Event{ID: "9007199254740993"}
	noID := []byte(`{"meta":{}}`)
	stringID := []byte(`{"meta":{"delivery_id":"dlv_1"}}`)
	idNotObject := []byte(`{"meta":"dlv_1"}`)
	notJSON := []byte(`[`)

	runVerifyCases(t, v, []verifyCase{
		{name: "valid, big numeric id kept exactly", body: body, header: valid, want: want},
		{name: "string id", body: stringID, header: request(stringID, acmeSecret, now), want: Event{ID: "dlv_1"}},
		{name: "within tolerance", body: body, header: request(body, acmeSecret, now.Add(-2*time.Minute)), want: want},
		{name: "wrong secret", body: body, header: request(body, acmeSecretOther, now), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signature over the body alone", body: body, header: with(valid, "X-Acme-Signature", macBase64(acmeSecret, string(body))), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing timestamp", body: body, header: with(valid, "X-Acme-Timestamp", ""), wantErr: ErrUnauthorized, reason: "missing_timestamp"},
		{name: "malformed timestamp", body: body, header: with(valid, "X-Acme-Timestamp", "1721153012.5"), wantErr: ErrUnauthorized, reason: "malformed_timestamp"},
		{name: "timestamp changed after signing", body: body, header: with(valid, "X-Acme-Timestamp", strconv.FormatInt(now.Unix()-1, 10)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "too old", body: body, header: request(body, acmeSecret, now.Add(-2*time.Minute-time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "too far in the future", body: body, header: request(body, acmeSecret, now.Add(2*time.Minute+time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "malformed signature", body: body, header: with(valid, "X-Acme-Signature", "sha256="+macBase64(acmeSecret, "x")), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "id missing", body: noID, header: request(noID, acmeSecret, now), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "path through a string", body: idNotObject, header: request(idNotObject, acmeSecret, now), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "body not JSON", body: notJSON, header: request(notJSON, acmeSecret, now), wantErr: ErrInvalid, reason: "unparsable_body"},
	}, acmeSecret)
}
