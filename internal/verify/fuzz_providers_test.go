package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzPaddleHeader feeds arbitrary Paddle-Signature values and bodies:
// whatever passes the signature check carries, in some h1, the HMAC of
// ts:body under the secret.
func FuzzPaddleHeader(f *testing.F) {
	f.Add(paddleDocSignature, []byte(paddleDocPayload))
	f.Add(paddleDocSignature+";h1="+strings.Repeat("0", 64), []byte(paddleDocPayload))
	f.Add("ts=1;ts=2;h1=zz", []byte("{}"))
	f.Add(strings.Repeat("h1=00;", 100), []byte("{}"))
	f.Add("ts=;h1=", []byte(nil))
	f.Add("=;=", []byte(nil))
	v, err := New(Config{Scheme: "paddle", Secrets: [][]byte{[]byte(paddleDocSecret)}})
	require.NoError(f, err)
	now := time.Unix(paddleDocUnix, 0)

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ev, err := v.Verify(body, headers(paddleSignatureHeader, header), now)
		requireWellFormed(t, ev, err, paddleDocSecret)
		if signatureVerified(err) {
			ts, _, _ := strings.Cut(strings.TrimPrefix(header, "ts="), ";")
			require.Contains(t, strings.ToLower(header), "h1="+macHex(paddleDocSecret, ts, ":", string(body)))
		}
	})
}

// FuzzAdyenBody feeds arbitrary bodies to the adyen scheme, whose
// signature is inside the body: nothing unsigned may come out as an event.
func FuzzAdyenBody(f *testing.F) {
	f.Add(adyenBody(f, adyenDocItem()))
	f.Add(adyenBody(f, adyenDocItem(), adyenDocItem()))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="}}}]}`))
	f.Add([]byte(`{"notificationItems":[[],{},null,1]}`))
	f.Add([]byte(`{"notificationItems":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(nil))
	v, err := New(Config{Scheme: "adyen", Secrets: [][]byte{[]byte(adyenDocKey)}})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := v.Verify(body, http.Header{}, testNow())
		requireWellFormed(t, ev, err, adyenDocKey)
		if err == nil {
			require.True(t, strings.HasSuffix(ev.ID, ":"+ev.Type), "id %q is pspReference:eventCode", ev.ID)
		}
	})
}

// FuzzPublicKeyHeaders feeds arbitrary signature and timestamp values to
// the ed25519 scheme: whatever passes is a valid Ed25519 signature.
func FuzzPublicKeyHeaders(f *testing.F) {
	body := []byte(`{"id":"1","type":"1"}`)
	good := discordSign(testNow(), body)
	f.Add(good.Get(discordSigHeader), good.Get(discordTimeHeader), body)
	f.Add(strings.Repeat("0", 128), good.Get(discordTimeHeader), body)
	f.Add("", "", []byte(nil))
	f.Add("zz", "-1", []byte("{}"))
	f.Add(strings.Repeat("ab", 1000), "1", []byte("{}"))
	v, err := New(discordConfig(discordPublicKeyHex))
	require.NoError(f, err)
	pub, _ := hex.DecodeString(discordPublicKeyHex)

	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		ev, err := v.Verify(body, headers(discordSigHeader, sig, discordTimeHeader, ts), testNow())
		requireWellFormed(t, ev, err)
		if signatureVerified(err) {
			raw, decErr := hex.DecodeString(sig)
			require.NoError(t, decErr)
			require.True(t, ed25519.Verify(pub, append([]byte(ts), body...), raw))
		}
	})
}

// FuzzPayPalHeaders feeds arbitrary PayPal headers and bodies: no request
// this package did not sign itself may verify.
func FuzzPayPalHeaders(f *testing.F) {
	now := testNow()
	pki := newPayPalPKI(f, now.Add(-time.Hour), now.Add(time.Hour))
	body := []byte(`{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`)
	good := pki.sign(f, "tid-1", now, body)
	f.Add(good.Get(paypalTransmissionIDHeader), good.Get(paypalTransmissionTimeHeader), good.Get(paypalTransmissionSigHeader), body)
	f.Add("a|b", good.Get(paypalTransmissionTimeHeader), good.Get(paypalTransmissionSigHeader), body)
	f.Add("", "", "", []byte(nil))
	f.Add("t", "2024-07-16T18:03:32Z", strings.Repeat("A", 2000), []byte("{}"))
	v, err := New(pki.config())
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := headers(paypalTransmissionIDHeader, id, paypalTransmissionTimeHeader, ts, paypalTransmissionSigHeader, sig)
		ev, err := v.Verify(body, h, now)
		requireWellFormed(t, ev, err)
		if signatureVerified(err) {
			signed := pki.sign(t, id, now, body)
			// PKCS#1 v1.5 signing is deterministic: the only signature that
			// verifies is the one the key makes.
			require.Equal(t, signed.Get(paypalTransmissionSigHeader), sig, fmt.Sprintf("id %q time %q", id, ts))
		}
	})
}

// FuzzSquareAndEasyPostHeaders feeds arbitrary signature values to the two
// body-only HMAC schemes: whatever passes carries the HMAC the sender
// would compute.
func FuzzSquareAndEasyPostHeaders(f *testing.F) {
	f.Add(squareDocSignature, easyPostDocSignature, []byte(squareDocBody))
	f.Add(squareDocSignature, easyPostDocSignature, []byte(easyPostDocBody))
	f.Add("", "", []byte(nil))
	f.Add("====", "hmac-sha256-hex=", []byte("{}"))
	f.Add(strings.Repeat("A", 44), "HMAC-SHA256-HEX="+strings.Repeat("0", 64), []byte("{}"))
	square, err := New(Config{Scheme: "square", Secrets: [][]byte{[]byte(squareDocKey)}, NotificationURL: squareDocURL})
	require.NoError(f, err)
	easyPost, err := New(Config{Scheme: "easypost", Secrets: [][]byte{[]byte(easyPostDocSecret)}})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, squareSig, easyPostSig string, body []byte) {
		ev, err := square.Verify(body, headers(squareSignatureHeader, squareSig), testNow())
		requireWellFormed(t, ev, err, squareDocKey)
		if signatureVerified(err) {
			require.Equal(t, macBase64(squareDocKey, squareDocURL, string(body)), squareSig)
		}
		ev, err = easyPost.Verify(body, headers(easyPostSignatureHeader, easyPostSig), testNow())
		requireWellFormed(t, ev, err, easyPostDocSecret)
		if signatureVerified(err) {
			require.Equal(t, easyPostPrefix+macHex("se\u0301cret", string(body)), strings.ToLower(easyPostSig))
		}
	})
}

// FuzzECDSAHeaders feeds arbitrary signature and timestamp values to the
// ecdsa scheme with SendGrid's published key: only SendGrid's own
// signature, over its own payload and timestamp, may pass.
func FuzzECDSAHeaders(f *testing.F) {
	f.Add(sendGridDocSignature, sendGridDocTimestamp, []byte(sendGridDocPayload))
	f.Add(sendGridDocSignature, "1588788368", []byte(sendGridDocPayload))
	f.Add("MAYCAQECAQE=", "1", []byte("{}"))
	f.Add("", "", []byte(nil))
	f.Add(strings.Repeat("A", 400), sendGridDocTimestamp, []byte(sendGridDocPayload))
	v, err := New(Config{
		Scheme: "ecdsa", Secrets: [][]byte{[]byte(sendGridDocPublicKey)},
		Header: sendGridSigHeader, TimestampHeader: sendGridTimeHeader, IDFrom: "json:message_id", TypeFrom: "json:event",
	})
	require.NoError(f, err)
	docTime := time.Unix(1588788367, 0)

	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		ev, err := v.Verify(body, headers(sendGridSigHeader, sig, sendGridTimeHeader, ts), docTime)
		requireWellFormed(t, ev, err)
		if signatureVerified(err) {
			require.Equal(t, sendGridDocTimestamp, ts)
			require.Equal(t, sendGridDocPayload, string(body))
		}
	})
}
