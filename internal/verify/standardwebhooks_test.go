package verify

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

const (
	swSecret        = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swSecretRotated = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	swSecretOther   = "whsec_dGhpcyBpcyBub3QgdGhlIHNlY3JldA=="
	swMsgID         = "msg_2jKq9PZy7TnWv3XcR8bL"
)

// swSign signs with the official Standard Webhooks library and returns its
// "v1,<base64>" entry.
func swSign(tb testing.TB, secret, id string, ts time.Time, body []byte) string {
	tb.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(tb, err)
	sig, err := wh.Sign(id, ts, body)
	require.NoError(tb, err)
	return sig
}

// swRequest returns the three Standard Webhooks headers for body signed by
// the official library.
func swRequest(tb testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	tb.Helper()
	h := headers(
		swTimestampHeader, strconv.FormatInt(ts.Unix(), 10),
		swSignatureHeader, swSign(tb, secret, id, ts, body),
	)
	if id != "" {
		h.Set(swIDHeader, id)
	}
	return h
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte(swSecret), []byte(swSecretRotated)}})
	require.NoError(t, err)

	body := readTestdata(t, "standardwebhooks_invoice_paid.json")
	now := testNow()
	ts := now.Add(-2 * time.Second)
	want := Event{ID: swMsgID, Type: "invoice.paid", ObjectID: "in_2jKq8ZxP4mWvR1"}
	valid := swRequest(t, swSecret, swMsgID, ts, body)
	good := valid.Get(swSignatureHeader)
	wrong := swSign(t, swSecretOther, swMsgID, ts, body)

	signed := func(id, b string) (body []byte, h http.Header) {
		return []byte(b), swRequest(t, swSecret, id, ts, []byte(b))
	}
	noID, noIDHeader := signed("", string(body))
	badID, badIDHeader := signed("msg 1", string(body))
	noType, noTypeHeader := signed(swMsgID, `{"data":{"id":"in_1"}}`)
	boolType, boolTypeHeader := signed(swMsgID, `{"type":true}`)
	notJSON, notJSONHeader := signed(swMsgID, `type=invoice.paid`)
	noData, noDataHeader := signed(swMsgID, `{"type":"ping"}`)
	numData, numDataHeader := signed(swMsgID, `{"type":"invoice.paid","data":{"id":12345678901234567890}}`)

	cases := []verifyCase{
		{name: "valid", body: body, header: valid, want: want},
		{name: "rotated second secret", body: body, header: swRequest(t, swSecretRotated, swMsgID, ts, body), want: want},
		{name: "second entry matches", body: body, header: with(valid, swSignatureHeader, wrong+" "+good), want: want},
		{name: "asymmetric and unknown versions skipped", body: body, header: with(valid, swSignatureHeader, "v1a,"+strings.Repeat("A", 88)+" v2,xyz "+good), want: want},
		{name: "no data.id", body: noData, header: noDataHeader, want: Event{ID: swMsgID, Type: "ping"}},
		{name: "numeric data.id kept as written", body: numData, header: numDataHeader, want: Event{ID: swMsgID, Type: "invoice.paid", ObjectID: "12345678901234567890"}},

		{name: "wrong secret", body: body, header: swRequest(t, swSecretOther, swMsgID, ts, body), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing signature", body: body, header: with(valid, swSignatureHeader, ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "missing timestamp", body: body, header: with(valid, swTimestampHeader, ""), wantErr: ErrUnauthorized, reason: "missing_timestamp"},
		{name: "timestamp rewritten in milliseconds", body: body, header: with(valid, swTimestampHeader, strconv.FormatInt(ts.UnixMilli(), 10)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "timestamp not a number", body: body, header: with(valid, swTimestampHeader, "2024-07-16T18:03:30Z"), wantErr: ErrUnauthorized, reason: "malformed_timestamp"},
		{name: "timestamp negative", body: body, header: with(valid, swTimestampHeader, "-1"), wantErr: ErrUnauthorized, reason: "malformed_timestamp"},
		{name: "no version", body: body, header: with(valid, swSignatureHeader, good[len("v1,"):]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "only other versions", body: body, header: with(valid, swSignatureHeader, "v2,"+good[len("v1,"):]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "not base64", body: body, header: with(valid, swSignatureHeader, "v1,"+strings.Repeat("!", 44)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "comma separated instead of spaces", body: body, header: with(valid, swSignatureHeader, wrong+","+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{
			name: "good entry past the entry bound is ignored", body: body,
			header:  with(valid, swSignatureHeader, strings.Repeat(wrong+" ", maxSignatureEntries)+good),
			wantErr: ErrUnauthorized, reason: "bad_signature",
		},
		{name: "id changed after signing", body: body, header: with(valid, swIDHeader, "msg_other"), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "timestamp changed after signing", body: body, header: with(valid, swTimestampHeader, strconv.FormatInt(ts.Unix()+1, 10)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "re-serialized body", body: reserialized(t, body), header: valid, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, len(body)-3), header: valid, wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "at the old edge of tolerance", body: body, header: swRequest(t, swSecret, swMsgID, now.Add(-5*time.Minute), body), want: want},
		{name: "at the future edge of tolerance", body: body, header: swRequest(t, swSecret, swMsgID, now.Add(5*time.Minute), body), want: want},
		{name: "too old", body: body, header: swRequest(t, swSecret, swMsgID, now.Add(-5*time.Minute-time.Second), body), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "too far in the future", body: body, header: swRequest(t, swSecret, swMsgID, now.Add(5*time.Minute+time.Second), body), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},

		{name: "id missing but signed", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id with a space", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "type missing", body: noType, header: noTypeHeader, wantErr: ErrInvalid, reason: "missing_type"},
		{name: "type a boolean", body: boolType, header: boolTypeHeader, wantErr: ErrInvalid, reason: "malformed_type"},
		{name: "body not JSON", body: notJSON, header: notJSONHeader, wantErr: ErrInvalid, reason: "unparsable_body"},
	}
	runVerifyCases(t, v, cases, swSecret, swSecretRotated, swSecret[len(swSecretPrefix):])
}

// TestStandardWebhooksSpecExample checks the example in the Standard
// Webhooks specification. Its payload has no type, so a good signature
// shows up as ErrInvalid missing_type rather than ErrUnauthorized.
func TestStandardWebhooksSpecExample(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}})
	require.NoError(t, err)
	h := headers(
		swIDHeader, "msg_p5jXN8AQM9LWM0D4loKWxJek",
		swTimestampHeader, "1614265330",
		swSignatureHeader, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	)
	_, err = v.Verify([]byte(`{"test": 2432232314}`), h, time.Unix(1614265330, 0))
	requireVerifyError(t, err, ErrInvalid, "missing_type")
}

// TestStandardWebhooksRawSecret accepts a secret given as bare base64, as
// some senders print it without the whsec_ prefix.
func TestStandardWebhooksRawSecret(t *testing.T) {
	t.Parallel()

	key := []byte("0123456789abcdef0123456789abcdef")
	bare := base64.StdEncoding.EncodeToString(key)
	v, err := New(Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte(bare)}})
	require.NoError(t, err)

	body := readTestdata(t, "standardwebhooks_invoice_paid.json")
	got, err := v.Verify(body, swRequest(t, swSecretPrefix+bare, swMsgID, testNow(), body), testNow())
	require.NoError(t, err)
	require.Equal(t, "invoice.paid", got.Type)
}

// TestStandardWebhooksAgreesWithLibrary checks that every request this
// package accepts, the official library's Verify (which reads the real
// clock) accepts too.
func TestStandardWebhooksAgreesWithLibrary(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte(swSecretOther), []byte(swSecret)}})
	require.NoError(t, err)
	wh, err := standardwebhooks.NewWebhook(swSecret)
	require.NoError(t, err)

	body := readTestdata(t, "standardwebhooks_invoice_paid.json")
	now := time.Now()
	valid := swRequest(t, swSecret, swMsgID, now, body)
	good := valid.Get(swSignatureHeader)
	wrong := swSign(t, swSecretOther, "msg_x", now, body)

	for _, sig := range []string{
		good,
		wrong + " " + good,
		"v1a,bm90IGFuIGVkMjU1MTkgc2lnbmF0dXJl " + good,
		good + " v2,future",
	} {
		h := with(valid, swSignatureHeader, sig)
		_, err := v.Verify(body, h, now)
		require.NoError(t, err, sig)
		require.NoError(t, wh.Verify(body, h), sig)
	}
}
