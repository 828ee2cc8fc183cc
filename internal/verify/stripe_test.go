package verify

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"
)

const (
	stripeSecret        = "whsec_5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f1a"
	stripeSecretRotated = "whsec_c8e0a2b4d6f8e0c2a4b6d8f0e2c4a6b8"
	stripeSecretOther   = "whsec_0000000000000000000000000000dead"
)

// stripeHeader signs body the way Stripe does, with stripe-go's own test
// helper, and returns the Stripe-Signature value.
func stripeHeader(body []byte, secret string, ts time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload:   body,
		Secret:    secret,
		Timestamp: ts,
	}).Header
}

// stripeV1 returns only the hex signature stripe-go computes.
func stripeV1(body []byte, secret string, ts time.Time) string {
	return hex.EncodeToString(webhook.ComputeSignature(ts, body, secret))
}

func stripeRequest(body []byte, secret string, ts time.Time) http.Header {
	return headers(stripeSignatureHeader, stripeHeader(body, secret, ts))
}

func TestStripe(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret), []byte(stripeSecretRotated)}})
	require.NoError(t, err)

	body := readTestdata(t, "stripe_checkout_session_completed.json")
	now := testNow()
	ts := now.Add(-3 * time.Second)
	want := Event{
		ID:       "evt_1PdU2vLkdIwHu7ixQ3aV9nRm",
		Type:     "checkout.session.completed",
		ObjectID: "cs_test_a1YbDgHq2kWqR7mO9sPZx4cVtLnE3fJ8uK6wB0yHdXeGiN5jTr",
	}
	tsText := fmt.Sprint(ts.Unix())
	good := stripeV1(body, stripeSecret, ts)
	wrong := stripeV1(body, stripeSecretOther, ts)

	// signed returns a request for a body of its own, correctly signed.
	signed := func(b string) (body []byte, h http.Header) {
		return []byte(b), stripeRequest([]byte(b), stripeSecret, ts)
	}
	noID, noIDHeader := signed(`{"object":"event","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`)
	badID, badIDHeader := signed(`{"id":"evt 1","type":"invoice.paid"}`)
	longID, longIDHeader := signed(`{"id":"evt_` + strings.Repeat("x", 253) + `","type":"invoice.paid"}`)
	objID, objIDHeader := signed(`{"id":{"nested":true},"type":"invoice.paid"}`)
	noType, noTypeHeader := signed(`{"id":"evt_1","data":{"object":{"id":"in_1"}}}`)
	badType, badTypeHeader := signed(`{"id":"evt_1","type":"invoice paid"}`)
	notJSON, notJSONHeader := signed(`id=evt_1&type=invoice.paid`)
	array, arrayHeader := signed(`[{"id":"evt_1","type":"invoice.paid"}]`)
	trailing, trailingHeader := signed(`{"id":"evt_1","type":"invoice.paid"} {"id":"evt_2"}`)
	noObject, noObjectHeader := signed(`{"id":"evt_1","type":"balance.available","data":{"object":{"object":"balance"}}}`)
	nullID, nullIDHeader := signed(`{"id":null,"type":"invoice.paid"}`)

	cases := []verifyCase{
		{name: "valid", body: body, header: stripeRequest(body, stripeSecret, ts), want: want},
		{name: "rotated second secret", body: body, header: stripeRequest(body, stripeSecretRotated, ts), want: want},
		{name: "second v1 matches", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1="+wrong+",v1="+good), want: want},
		{name: "v0 and unknown keys ignored", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v0="+wrong+",v1="+good+",x=y"), want: want},
		{name: "undecodable v1 ignored beside a good one", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1=nothex,v1="+good), want: want},
		{name: "timestamp after signatures", body: body, header: headers(stripeSignatureHeader, "v1="+good+",t="+tsText), want: want},
		{name: "object id missing is fine", body: noObject, header: noObjectHeader, want: Event{ID: "evt_1", Type: "balance.available"}},

		{name: "wrong secret", body: body, header: stripeRequest(body, stripeSecretOther, ts), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: http.Header{}, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "nil header", body: body, header: nil, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "other provider's header", body: body, header: headers(githubSignatureHeader, "sha256="+good), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "garbage header", body: body, header: headers(stripeSignatureHeader, "garbage"), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "no timestamp", body: body, header: headers(stripeSignatureHeader, "v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "no v1", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v0="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "v1 not hex", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1="+strings.Repeat("z", 64)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "v1 truncated", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1="+good[:62]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "timestamp not a number", body: body, header: headers(stripeSignatureHeader, "t=yesterday,v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "timestamp with sign", body: body, header: headers(stripeSignatureHeader, "t=+"+tsText+",v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "timestamp with leading zero", body: body, header: headers(stripeSignatureHeader, "t=0"+tsText+",v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "two timestamps", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",t="+tsText+",v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "entry without equals", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1="+good+",junk"), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "trailing comma", body: body, header: headers(stripeSignatureHeader, "t="+tsText+",v1="+good+","), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "spaces after commas", body: body, header: headers(stripeSignatureHeader, "t="+tsText+", v1="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{
			name: "good v1 past the entry bound is ignored", body: body,
			header:  headers(stripeSignatureHeader, "t="+tsText+strings.Repeat(",v1="+wrong, maxSignatureEntries)+",v1="+good),
			wantErr: ErrUnauthorized, reason: "bad_signature",
		},

		{name: "timestamp changed after signing", body: body, header: headers(stripeSignatureHeader, fmt.Sprintf("t=%d,v1=%s", ts.Unix()+1, good)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "re-serialized body", body: reserialized(t, body), header: stripeRequest(body, stripeSecret, ts), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, len(body)/2), header: stripeRequest(body, stripeSecret, ts), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "trailing newline added", body: append(append([]byte(nil), body...), '\n'), header: stripeRequest(body, stripeSecret, ts), wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "at the old edge of tolerance", body: body, now: now, header: stripeRequest(body, stripeSecret, now.Add(-5*time.Minute)), want: want},
		{name: "at the future edge of tolerance", body: body, now: now, header: stripeRequest(body, stripeSecret, now.Add(5*time.Minute)), want: want},
		{name: "too old", body: body, now: now, header: stripeRequest(body, stripeSecret, now.Add(-5*time.Minute-time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "too far in the future", body: body, now: now, header: stripeRequest(body, stripeSecret, now.Add(5*time.Minute+time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "epoch", body: body, header: stripeRequest(body, stripeSecret, time.Unix(0, 0)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "too old and wrong secret is a bad signature", body: body, header: stripeRequest(body, stripeSecretOther, now.Add(-time.Hour)), wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "id missing", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id null", body: nullID, header: nullIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id with a space", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "id too long", body: longID, header: longIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "id an object", body: objID, header: objIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "type missing", body: noType, header: noTypeHeader, wantErr: ErrInvalid, reason: "missing_type"},
		{name: "type with a space", body: badType, header: badTypeHeader, wantErr: ErrInvalid, reason: "malformed_type"},
		{name: "body not JSON", body: notJSON, header: notJSONHeader, wantErr: ErrInvalid, reason: "unparsable_body"},
		{name: "body a JSON array", body: array, header: arrayHeader, wantErr: ErrInvalid, reason: "unparsable_body"},
		{name: "body with trailing data", body: trailing, header: trailingHeader, wantErr: ErrInvalid, reason: "unparsable_body"},
	}
	runVerifyCases(t, v, cases, stripeSecret, stripeSecretRotated)
}

// TestStripeHeaderMessages checks that the message names what is wrong with
// the header, as the sender sees it in the 401.
func TestStripeHeaderMessages(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret)}})
	require.NoError(t, err)
	body := readTestdata(t, "stripe_checkout_session_completed.json")
	ts := strconv.FormatInt(testNow().Unix(), 10)
	for header, want := range map[string]string{
		"v1=deadbeef":                   "Stripe-Signature header has a malformed v1 signature (want 64 hex digits)",
		"t=" + ts + ",v1=deadbeef":      "Stripe-Signature header has a malformed v1 signature (want 64 hex digits)",
		"t=" + ts + ",v0=deadbeef":      "Stripe-Signature header has no v1 signature",
		"v1=" + strings.Repeat("a", 64): "Stripe-Signature header has no timestamp",
	} {
		_, err := v.Verify(body, headers(stripeSignatureHeader, header), testNow())
		require.EqualError(t, err, want, header)
		require.ErrorIs(t, err, ErrUnauthorized, header)
	}
}

func TestStripeTolerance(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret)}, Tolerance: 30 * time.Second})
	require.NoError(t, err)
	body := readTestdata(t, "stripe_checkout_session_completed.json")
	now := testNow()

	runVerifyCases(t, v, []verifyCase{
		{name: "within", body: body, header: stripeRequest(body, stripeSecret, now.Add(-30*time.Second)), want: Event{
			ID: "evt_1PdU2vLkdIwHu7ixQ3aV9nRm", Type: "checkout.session.completed",
			ObjectID: "cs_test_a1YbDgHq2kWqR7mO9sPZx4cVtLnE3fJ8uK6wB0yHdXeGiN5jTr",
		}},
		{name: "old", body: body, header: stripeRequest(body, stripeSecret, now.Add(-31*time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "future", body: body, header: stripeRequest(body, stripeSecret, now.Add(31*time.Second)), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
	}, stripeSecret)
}

// TestStripeAgreesWithStripeGo checks that what this package accepts,
// stripe-go's own validator accepts too.
func TestStripeAgreesWithStripeGo(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret)}})
	require.NoError(t, err)
	body := readTestdata(t, "stripe_checkout_session_completed.json")
	now := time.Now()
	good := stripeV1(body, stripeSecret, now)
	wrong := stripeV1(body, stripeSecretOther, now)

	for _, header := range []string{
		stripeHeader(body, stripeSecret, now),
		fmt.Sprintf("t=%d,v1=%s,v1=%s", now.Unix(), wrong, good),
		fmt.Sprintf("t=%d,v0=%s,v1=%s", now.Unix(), wrong, good),
		fmt.Sprintf("v1=%s,t=%d", good, now.Unix()),
	} {
		_, err := v.Verify(body, headers(stripeSignatureHeader, header), now)
		require.NoError(t, err, header)
		require.NoError(t, webhook.ValidatePayload(body, header, stripeSecret), header)
	}
}

// The body as parsed to find the id and type is handed on, so that routes
// need not parse it again.
func TestStripeHandsOnTheParsedBody(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret)}})
	require.NoError(t, err)
	body := readTestdata(t, "stripe_checkout_session_completed.json")
	ev, err := v.Verify(body, stripeRequest(body, stripeSecret, testNow()), testNow())
	require.NoError(t, err)
	require.NotNil(t, ev.Body)
	require.Equal(t, ev.ID, ev.Body["id"])
	require.Equal(t, json.Number("4200"), ev.Body["data"].(map[string]any)["object"].(map[string]any)["amount_total"])
}
