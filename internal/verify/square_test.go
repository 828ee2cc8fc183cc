package verify

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The valid request of square-go-sdk's webhooks/client/verify_signature_test.go:
// a notification Square signed for this URL and signature key.
const (
	squareDocKey       = "Ibxx_5AKakO-3qeNVR61Dw"
	squareDocURL       = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
	squareDocSignature = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
	squareDocBody      = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
)

func TestSquare(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "square", Secrets: [][]byte{[]byte(squareDocKey)}, NotificationURL: squareDocURL})
	require.NoError(t, err)
	otherURL, err := New(Config{Scheme: "square", Secrets: [][]byte{[]byte(squareDocKey)}, NotificationURL: "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9"})
	require.NoError(t, err)

	body := []byte(squareDocBody)
	want := Event{ID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", Type: "webhooks.test_notification", ObjectID: "bc368e64-01aa-407e-b46e-3231809b1129"}
	signed := func(b string) (body []byte, h http.Header) {
		return []byte(b), headers(squareSignatureHeader, macBase64(squareDocKey, squareDocURL, b))
	}
	noID, noIDHeader := signed(`{"type":"payment.updated","data":{"id":"p1"}}`)
	badID, badIDHeader := signed(`{"event_id":"a b","type":"payment.updated"}`)
	noType, noTypeHeader := signed(`{"event_id":"e1"}`)

	runVerifyCases(t, v, []verifyCase{
		{name: "Square's own example", body: body, header: headers(squareSignatureHeader, squareDocSignature), want: want},
		{name: "signed here", body: body, header: headers(squareSignatureHeader, macBase64(squareDocKey, squareDocURL, squareDocBody)), want: want},

		{name: "wrong key", body: body, header: headers(squareSignatureHeader, macBase64("MCmhFRxGX82xMwg5FsaoQA", squareDocURL, squareDocBody)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "body alone signed", body: body, header: headers(squareSignatureHeader, macBase64(squareDocKey, squareDocBody)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "body changed", body: flipByte(body, 30), header: headers(squareSignatureHeader, squareDocSignature), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "SHA-1 header only", body: body, header: headers("X-Square-Signature", "1z2n3DEJJiUPKcPzQo1ftvbxGdw="), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "not base64", body: body, header: headers(squareSignatureHeader, "1z2n3DEJJiUPKcPzQo1ftvbxGdw="), wantErr: ErrUnauthorized, reason: "malformed_signature"},

		{name: "event_id missing", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "event_id malformed", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "type missing", body: noType, header: noTypeHeader, wantErr: ErrInvalid, reason: "missing_type"},
	}, squareDocKey)

	// The same request, verified for another notification URL: refused.
	_, err = otherURL.Verify(body, headers(squareSignatureHeader, squareDocSignature), testNow())
	requireVerifyError(t, err, ErrUnauthorized, "bad_signature")
}

func TestSquareNeedsItsURL(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"":                  "notification_url is required",
		"/hooks/square":     "must be an absolute http or https URL",
		"ftp://example.com": "must be an absolute http or https URL",
	} {
		_, err := New(Config{Scheme: "square", Secrets: [][]byte{[]byte(squareDocKey)}, NotificationURL: url})
		require.ErrorContains(t, err, want, url)
	}
	_, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte("whsec_x")}, NotificationURL: squareDocURL})
	require.ErrorContains(t, err, "notification_url applies only to scheme square")
}
