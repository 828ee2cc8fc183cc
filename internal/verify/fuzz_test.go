package verify

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"
)

// requireWellFormed asserts what holds for every Verify result: either a
// valid event and no error, or no event and an *Error of exactly one kind
// whose message holds no secret.
func requireWellFormed(t *testing.T, ev Event, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		require.True(t, ValidID(ev.ID), "accepted id %q", ev.ID)
		require.True(t, ev.Type == "" || ValidID(ev.Type), "accepted type %q", ev.Type)
		require.True(t, ev.ObjectID == "" || ValidID(ev.ObjectID), "accepted object id %q", ev.ObjectID)
		return
	}
	require.Zero(t, ev)
	var ve *Error
	require.ErrorAs(t, err, &ve)
	require.NotEmpty(t, ve.Reason)
	require.True(t, errors.Is(err, ErrUnauthorized) != errors.Is(err, ErrInvalid), "kind %v", ve.Kind)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}
}

// signatureVerified reports whether Verify got past the signature check.
func signatureVerified(err error) bool {
	return err == nil || errors.Is(err, ErrInvalid)
}

// FuzzStripeHeader feeds arbitrary Stripe-Signature values and bodies. Past
// not panicking, whatever passes the signature check must also pass
// stripe-go's own check.
func FuzzStripeHeader(f *testing.F) {
	body := readTestdata(f, "stripe_checkout_session_completed.json")
	ts := testNow()
	good := stripeHeader(body, stripeSecret, ts)
	f.Add(good, body)
	f.Add(good+",v1="+strings.Repeat("0", 64), body)
	f.Add(fmt.Sprintf("t=%d,v0=00,v1=%s", ts.Unix(), stripeV1(body, stripeSecret, ts)), body)
	f.Add(stripeHeader([]byte(`{"id":"evt 1","type":"x"}`), stripeSecret, ts), []byte(`{"id":"evt 1","type":"x"}`))
	f.Add(stripeHeader([]byte(`[]`), stripeSecret, ts), []byte(`[]`))
	f.Add("t=,v1=", []byte{})
	f.Add("t=1,t=2,v1=zz", []byte("{}"))
	f.Add("=,=,=", []byte(nil))
	f.Add(strings.Repeat("v1=00,", 100), []byte("{}"))
	f.Add("t=99999999999999999999,v1=00", []byte("{}"))

	v, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(stripeSecret)}})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ev, err := v.Verify(body, headers(stripeSignatureHeader, header), ts)
		requireWellFormed(t, ev, err, stripeSecret)
		if signatureVerified(err) && strings.Count(header, ",") < maxSignatureEntries {
			require.NoError(t, webhook.ValidatePayloadIgnoringTolerance(body, header, stripeSecret))
		}
	})
}

// FuzzStandardWebhooksHeader feeds arbitrary webhook-id, webhook-timestamp
// and webhook-signature values. Whatever passes the signature check must
// also pass the official library's.
func FuzzStandardWebhooksHeader(f *testing.F) {
	body := readTestdata(f, "standardwebhooks_invoice_paid.json")
	ts := testNow()
	tsText := strconv.FormatInt(ts.Unix(), 10)
	good := swSign(f, swSecret, swMsgID, ts, body)
	f.Add(swMsgID, tsText, good, body)
	f.Add(swMsgID, tsText, "v1,AAAA "+good+" v1a,xyz", body)
	f.Add("", tsText, swSign(f, swSecret, "", ts, body), body)
	f.Add("msg 1", tsText, swSign(f, swSecret, "msg 1", ts, body), body)
	f.Add(swMsgID, tsText, swSign(f, swSecret, swMsgID, ts, []byte("x")), []byte("x"))
	f.Add(swMsgID, "+"+tsText, good, body)
	f.Add(swMsgID, "", "", []byte(nil))
	f.Add("a", "0", "v1,", []byte("{}"))
	f.Add("a", "1", strings.Repeat(" ", 100), []byte("{}"))
	f.Add("a", "1", "v1,"+strings.Repeat("=", 44), []byte("{}"))

	v, err := New(Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte(swSecret)}})
	require.NoError(f, err)
	wh, err := standardwebhooks.NewWebhook(swSecret)
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		h := http.Header{}
		h.Set(swIDHeader, id)
		h.Set(swTimestampHeader, timestamp)
		h.Set(swSignatureHeader, signature)
		ev, err := v.Verify(body, h, ts)
		requireWellFormed(t, ev, err, swSecret, swSecret[len(swSecretPrefix):])
		// The library refuses an empty id outright; this package verifies
		// the signature first and answers ErrInvalid.
		if signatureVerified(err) && id != "" {
			require.NoError(t, wh.VerifyIgnoringTimestamp(body, h))
		}
	})
}

// FuzzHMACHeader feeds arbitrary signature and timestamp values to the
// generic scheme, configured with a prefix, a timestamp and a JSON id.
func FuzzHMACHeader(f *testing.F) {
	body := []byte(`{"meta":{"delivery_id":"dlv_1"},"kind":"shipment.created"}`)
	ts := testNow()
	tsText := strconv.FormatInt(ts.Unix(), 10)
	f.Add("sha256="+macHex(acmeSecret, tsText, ".", string(body)), tsText, body)
	f.Add("sha256="+macHex(acmeSecret, tsText, ".", "[]"), tsText, []byte("[]"))
	f.Add("sha256=", tsText, body)
	f.Add("sha256="+strings.Repeat("0", 64), "", body)
	f.Add("", "", []byte(nil))
	f.Add("sha256=zz", "-5", []byte("{}"))

	v, err := New(Config{
		Scheme: "hmac", Secrets: [][]byte{[]byte(acmeSecret)},
		Header: "X-Acme-Signature", Prefix: "sha256=", Encoding: "hex",
		IDFrom: "json:meta.delivery_id", TypeFrom: "json:kind", TimestampHeader: "X-Acme-Timestamp",
	})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, signature, timestamp string, body []byte) {
		h := headers("X-Acme-Signature", signature, "X-Acme-Timestamp", timestamp)
		ev, err := v.Verify(body, h, ts)
		requireWellFormed(t, ev, err, acmeSecret)
		if signatureVerified(err) {
			require.Equal(t, "sha256="+macHex(acmeSecret, timestamp, ".", string(body)), strings.ToLower(signature))
		}
	})
}

// FuzzNormalize signs arbitrary bodies and id/type header values correctly
// for every scheme, so the fuzzer works on what follows the signature check:
// a correctly signed request may be ErrInvalid but never ErrUnauthorized.
func FuzzNormalize(f *testing.F) {
	for _, name := range []string{
		"stripe_checkout_session_completed.json",
		"github_push.json",
		"shopify_orders_create.json",
		"standardwebhooks_invoice_paid.json",
	} {
		f.Add(readTestdata(f, name), "evt_1", "push")
	}
	f.Add([]byte(`{"id":"a","type":"b","data":{"id":1e400,"object":{"id":[]}}}`), "a", "b")
	f.Add([]byte(`{"id":12,"type":null}`), "", "")
	f.Add([]byte(`{"id":"\ud800","type":"\u0000"}`), "id\x00", "type with space")
	f.Add([]byte(`{"a":`+strings.Repeat("[", 1000)), strings.Repeat("i", 300), "t")
	f.Add([]byte(`{"id":"`+strings.Repeat("x", 256)+`","type":"t"}`), "x", "t")

	now := testNow()
	secret := []byte("fuzz-secret")
	swKey := "whsec_ZnV6ei1zZWNyZXQ="
	verifiers := map[string]Verifier{}
	for _, c := range []Config{
		{Scheme: "stripe", Secrets: [][]byte{secret}},
		{Scheme: "github", Secrets: [][]byte{secret}},
		{Scheme: "shopify", Secrets: [][]byte{secret}},
		{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte(swKey)}},
		{Scheme: "hmac", Secrets: [][]byte{secret}, Header: "X-Sig", Encoding: "base64", IDFrom: "json:id", TypeFrom: "header:X-Type"},
		{Scheme: "paddle", Secrets: [][]byte{secret}},
		{Scheme: "square", Secrets: [][]byte{secret}, NotificationURL: "https://hooks.example/square"},
		{Scheme: "easypost", Secrets: [][]byte{secret}},
	} {
		v, err := New(c)
		require.NoError(f, err)
		verifiers[c.Scheme] = v
	}

	f.Fuzz(func(t *testing.T, body []byte, id, typ string) {
		requests := map[string]http.Header{
			"stripe": headers(stripeSignatureHeader, stripeHeader(body, string(secret), now)),
			"github": headers(githubSignatureHeader, "sha256="+macHex(string(secret), string(body)),
				githubDeliveryHeader, id, githubEventHeader, typ),
			"shopify": headers(shopifySignatureHeader, macBase64(string(secret), string(body)),
				shopifyEventIDHeader, id, shopifyTopicHeader, typ),
			"standard-webhooks": headers(swIDHeader, id, swTimestampHeader, strconv.FormatInt(now.Unix(), 10),
				swSignatureHeader, swSign(t, swKey, id, now, body)),
			"hmac":     headers("X-Sig", macBase64(string(secret), string(body)), "X-Type", typ),
			"paddle":   headers(paddleSignatureHeader, paddleHeader(string(secret), now, body)),
			"square":   headers(squareSignatureHeader, macBase64(string(secret), "https://hooks.example/square", string(body))),
			"easypost": headers(easyPostSignatureHeader, easyPostPrefix+macHex(string(secret), string(body))),
		}
		for scheme, h := range requests {
			ev, err := verifiers[scheme].Verify(body, h, now.Add(time.Second))
			requireWellFormed(t, ev, err, string(secret), swKey)
			require.NotErrorIs(t, err, ErrUnauthorized, scheme)
		}
	})
}
