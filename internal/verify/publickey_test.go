package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The vector of sendgrid-go's helpers/eventwebhook/eventwebhook_test.go:
// SendGrid's signed event webhook, ECDSA P-256 over timestamp + payload.
const (
	sendGridDocTimestamp = "1588788367"
	sendGridDocPublicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendGridDocSignature = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
	// The payload is json.Marshal of a map, so its keys are sorted.
	sendGridDocPayload  = `{"category":"example_payload","event":"test_event","message_id":"message_id"}`
	sendGridSigHeader   = "X-Twilio-Email-Event-Webhook-Signature"
	sendGridTimeHeader  = "X-Twilio-Email-Event-Webhook-Timestamp"
	discordSigHeader    = "X-Signature-Ed25519"
	discordTimeHeader   = "X-Signature-Timestamp"
	discordSeedHex      = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60" // RFC 8032 test 1
	discordPublicKeyHex = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

// discordSign signs as Discord does: Ed25519 over timestamp + body, hex.
func discordSign(ts time.Time, body []byte) http.Header {
	seed, _ := hex.DecodeString(discordSeedHex)
	t := fmt.Sprint(ts.Unix())
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(seed), append([]byte(t), body...))
	return headers(discordSigHeader, hex.EncodeToString(sig), discordTimeHeader, t)
}

func discordConfig(keys ...string) Config {
	c := Config{Scheme: "ed25519", Header: discordSigHeader, TimestampHeader: discordTimeHeader, IDFrom: "json:id", TypeFrom: "json:type"}
	for _, k := range keys {
		c.Secrets = append(c.Secrets, []byte(k))
	}
	return c
}

func TestEd25519(t *testing.T) {
	t.Parallel()

	// The RFC 8032 key: its public half must be what the seed makes.
	seed, _ := hex.DecodeString(discordSeedHex)
	require.Equal(t, discordPublicKeyHex, hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)))
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	v, err := New(discordConfig(hex.EncodeToString(other), discordPublicKeyHex))
	require.NoError(t, err)

	body := []byte(`{"id":"1114461711931797504","type":"2","application_id":"11","token":"t"}`)
	now := testNow()
	want := Event{ID: "1114461711931797504", Type: "2"}
	good := discordSign(now, body)
	signed := func(b string) ([]byte, http.Header) { return []byte(b), discordSign(now, []byte(b)) }
	noID, noIDHeader := signed(`{"type":"1"}`)
	badID, badIDHeader := signed(`{"id":"a b","type":"1"}`)
	numeric, numericHeader := signed(`{"id":1114461711931797505,"type":1}`)

	runVerifyCases(t, v, []verifyCase{
		{name: "signed", body: body, header: good, want: want},
		{name: "numbers keep their spelling", body: numeric, header: numericHeader, want: Event{ID: "1114461711931797505", Type: "1"}},
		{name: "wrong key", body: body, header: with(good, discordSigHeader, hex.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(make([]byte, 32)), append([]byte(good.Get(discordTimeHeader)), body...)))), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "timestamp changed", body: body, header: with(good, discordTimeHeader, fmt.Sprint(now.Unix()+1)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "body changed", body: flipByte(body, 10), header: good, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signature missing", body: body, header: with(good, discordSigHeader, ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "signature not hex", body: body, header: with(good, discordSigHeader, "zz"), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "signature truncated", body: body, header: with(good, discordSigHeader, good.Get(discordSigHeader)[:64]), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "timestamp missing", body: body, header: with(good, discordTimeHeader, ""), wantErr: ErrUnauthorized, reason: "missing_timestamp"},
		{name: "timestamp not unix", body: body, header: with(good, discordTimeHeader, "yesterday"), wantErr: ErrUnauthorized, reason: "malformed_timestamp"},
		{name: "stale", body: body, header: discordSign(now.Add(-6*time.Minute), body), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "id missing", body: noID, header: noIDHeader, wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id malformed", body: badID, header: badIDHeader, wantErr: ErrInvalid, reason: "malformed_id"},
	})
}

func TestECDSA(t *testing.T) {
	t.Parallel()

	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	otherDER, err := x509.MarshalPKIXPublicKey(&other.PublicKey)
	require.NoError(t, err)
	otherPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: otherDER}))
	v, err := New(Config{
		Scheme: "ecdsa", Secrets: [][]byte{[]byte(otherPEM), []byte(sendGridDocPublicKey)},
		Header: sendGridSigHeader, TimestampHeader: sendGridTimeHeader, IDFrom: "json:message_id", TypeFrom: "json:event",
	})
	require.NoError(t, err)

	body := []byte(sendGridDocPayload)
	docTime := time.Unix(1588788367, 0)
	doc := headers(sendGridSigHeader, sendGridDocSignature, sendGridTimeHeader, sendGridDocTimestamp)
	sign := func(ts time.Time, b []byte) http.Header {
		unix := fmt.Sprint(ts.Unix())
		d := sha256.Sum256(append([]byte(unix), b...))
		sig, err := ecdsa.SignASN1(rand.Reader, other, d[:])
		require.NoError(t, err)
		return headers(sendGridSigHeader, base64.StdEncoding.EncodeToString(sig), sendGridTimeHeader, unix)
	}
	noID := []byte(`{"event":"delivered"}`)
	badID := []byte(`{"event":"delivered","message_id":"a b"}`)

	runVerifyCases(t, v, []verifyCase{
		{name: "SendGrid's own example", body: body, header: doc, now: docTime, want: Event{ID: "message_id", Type: "test_event"}},
		{name: "signed with the PEM key", body: body, header: sign(testNow(), body), want: Event{ID: "message_id", Type: "test_event"}},
		{name: "body changed", body: flipByte(body, 5), header: doc, now: docTime, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "timestamp changed", body: body, header: with(doc, sendGridTimeHeader, "1588788368"), now: docTime, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signature not DER", body: body, header: with(doc, sendGridSigHeader, base64.StdEncoding.EncodeToString([]byte("not der"))), now: docTime, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signature not base64", body: body, header: with(doc, sendGridSigHeader, "%%%"), now: docTime, wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "signature missing", body: body, header: with(doc, sendGridSigHeader, ""), now: docTime, wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "stale", body: body, header: doc, wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "id missing", body: noID, header: sign(testNow(), noID), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id malformed", body: badID, header: sign(testNow(), badID), wantErr: ErrInvalid, reason: "malformed_id"},
	})
}

func TestPublicKeyParsing(t *testing.T) {
	t.Parallel()

	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a key type to refuse, never used to sign
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub)
	pemOf := func(der []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})) }

	for _, tc := range []struct{ scheme, key, want string }{
		{"ed25519", discordPublicKeyHex, ""},
		{"ed25519", base64.StdEncoding.EncodeToString(edPub), ""},
		{"ed25519", pemOf(edDER), ""},
		{"ed25519", sendGridDocPublicKey, "is an ECDSA P-256 key, not an Ed25519 public key"},
		{"ed25519", pemOf(rsaDER), "is an RSA key, not an Ed25519 public key"},
		{"ed25519", "d75a98", "is not an Ed25519 public key"},
		{"ecdsa", sendGridDocPublicKey, ""},
		{"ecdsa", pemOf(p384), "is an ECDSA P-384 key, not an ECDSA P-256 public key"},
		{"ecdsa", discordPublicKeyHex, "is an Ed25519 key, not an ECDSA P-256 public key"},
		{"ecdsa", pemOf(edDER), "is an Ed25519 key, not an ECDSA P-256 public key"},
		{"ecdsa", strings.Replace(pemOf(rsaDER), "PUBLIC KEY", "RSA PUBLIC KEY", 2), `is not an ECDSA P-256 public key: it is a PEM "RSA PUBLIC KEY" block, not PUBLIC KEY`},
	} {
		err := CheckPublicKey(tc.scheme, []byte(tc.key))
		if tc.want == "" {
			require.NoError(t, err, tc.key)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.key)
		if k := strings.TrimSpace(tc.key); len(k) >= 20 {
			require.NotContains(t, err.Error(), k[:20])
		}
		c := Config{Scheme: tc.scheme, Secrets: [][]byte{[]byte(tc.key)}, Header: "X-Sig", TimestampHeader: "X-Ts", IDFrom: "json:id"}
		_, err = New(c)
		require.ErrorContains(t, err, "public key 1 of 1 "+tc.want)
	}
	require.NoError(t, CheckPublicKey("stripe", []byte("whatever")))
}

func TestPublicKeySettings(t *testing.T) {
	t.Parallel()
	base := discordConfig(discordPublicKeyHex)
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Header = "" }, "header is required for scheme ed25519"},
		{func(c *Config) { c.TimestampHeader = "" }, "timestamp_header is required for scheme ed25519"},
		{func(c *Config) { c.IDFrom = "" }, "id_from is required for scheme ed25519"},
		{func(c *Config) { c.Encoding = "base32" }, `encoding "base32" must be hex or base64`},
		{func(c *Config) { c.Prefix = "v1=" }, "prefix applies only to scheme hmac"},
		{func(c *Config) { c.Secrets = nil }, "no secrets configured"},
	} {
		c := base
		tc.change(&c)
		_, err := New(c)
		require.ErrorContains(t, err, tc.want)
	}
}
