package verify

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The example of paddle-go-sdk's example_webhook_verifier_test.go: a
// notification signed by Paddle with this destination's secret key.
const (
	paddleDocSecret    = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	paddleDocSignature = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
	paddleDocPayload   = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
	paddleDocUnix      = 1710929255

	paddleOther = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_0000000000000000000000000000"
)

// paddleHeader signs body as Paddle does: h1 = hex HMAC-SHA256 of ts:body.
func paddleHeader(secret string, ts time.Time, body []byte) string {
	t := fmt.Sprint(ts.Unix())
	return "ts=" + t + ";h1=" + macHex(secret, t, ":", string(body))
}

func TestPaddle(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "paddle", Secrets: [][]byte{[]byte(paddleOther), []byte(paddleDocSecret)}})
	require.NoError(t, err)

	body := []byte(paddleDocPayload)
	docNow := time.Unix(paddleDocUnix+2, 0)
	want := Event{ID: "evt_01hsdn97563968dy0szkmgjwh3", Type: "price.created", ObjectID: "pri_01hsdn96k2hxjzsq5yerecdj9j"}
	now := testNow()
	signed := func(b string) (body []byte, h http.Header) {
		return []byte(b), headers(paddleSignatureHeader, paddleHeader(paddleDocSecret, now, []byte(b)))
	}
	noID, noIDHeader := signed(`{"event_type":"price.created","data":{"id":"pri_1"}}`)
	badID, badIDHeader := signed(`{"event_id":"evt 1","event_type":"price.created"}`)
	noType, noTypeHeader := signed(`{"event_id":"evt_1"}`)
	dupID, dupIDHeader := signed(`{"event_id":"evt_1","EVENT_ID":"evt_2","event_type":"price.created"}`)
	good := paddleHeader(paddleDocSecret, now, body)
	_, goodH1, _ := strings.Cut(good, ";")
	ts := fmt.Sprint(now.Unix())

	runVerifyCases(t, v, []verifyCase{
		{name: "Paddle's own example", body: body, header: headers(paddleSignatureHeader, paddleDocSignature), now: docNow, want: want},
		{name: "signed now", body: body, header: headers(paddleSignatureHeader, good), want: want},
		{name: "second h1 matches (rotation)", body: body, header: headers(paddleSignatureHeader, "ts="+ts+";h1="+macHex(paddleOther+"x", ts, ":", string(body))+";"+goodH1), want: want},
		{name: "unknown keys ignored", body: body, header: headers(paddleSignatureHeader, good+";h2=abc"), want: want},

		{name: "wrong secret", body: body, header: headers(paddleSignatureHeader, paddleHeader("pdl_wrong", now, body)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, 40), header: headers(paddleSignatureHeader, good), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "no timestamp", body: body, header: headers(paddleSignatureHeader, goodH1), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "two timestamps", body: body, header: headers(paddleSignatureHeader, "ts="+ts+";"+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "h1 not hex", body: body, header: headers(paddleSignatureHeader, "ts="+ts+";h1="+strings.Repeat("z", 64)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "stripe's separator", body: body, header: headers(paddleSignatureHeader, "ts="+ts+",h1="+macHex(paddleDocSecret, ts, ":", string(body))), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "signed with a dot instead of a colon", body: body, header: headers(paddleSignatureHeader, "ts="+ts+";h1="+macHex(paddleDocSecret, ts, ".", string(body))), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "stale", body: body, header: headers(paddleSignatureHeader, paddleDocSignature), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "too far in the future", body: body, header: headers(paddleSignatureHeader, paddleHeader(paddleDocSecret, now.Add(6*time.Minute), body)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},

		{name: "event_id missing", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "event_id malformed", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "event_type missing", body: noType, header: noTypeHeader, wantErr: ErrInvalid, reason: "missing_type"},
		{name: "event_id twice", body: dupID, header: dupIDHeader, wantErr: ErrInvalid, reason: "ambiguous_field"},
	}, paddleDocSecret, paddleOther)
}
