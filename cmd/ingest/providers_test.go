package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/crc32"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// The payment and shipping schemes, end to end: each provider's request,
// signed as the provider signs it, through the real ingest server and its
// database.

const (
	paddleSecret    = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	squareKey       = "Ibxx_5AKakO-3qeNVR61Dw"
	squareURL       = "https://hooks.example.com/webhooks/square"
	easyPostSecret  = "s\u00e9cret"
	adyenKey        = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	paypalWebhookID = "1JE4291016473214C"
)

// providerKeys are the public-key schemes' keys and PayPal's PKI for one test.
type providerKeys struct {
	ed       ed25519.PrivateKey
	ec       *ecdsa.PrivateKey
	paypal   *rsa.PrivateKey
	certFile string
	caFile   string
	// strangerCert is a signing certificate from another CA.
	strangerCert string
}

func newProviderKeys(t *testing.T) providerKeys {
	t.Helper()
	dir := t.TempDir()
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k := providerKeys{ed: ed, ec: ec}
	k.paypal, k.certFile, k.caFile = issuePayPalCert(t, dir, "ours")
	_, k.strangerCert, _ = issuePayPalCert(t, dir, "stranger")
	return k
}

// issuePayPalCert makes a CA and a signing certificate under it, as files.
func issuePayPalCert(t *testing.T, dir, name string) (*rsa.PrivateKey, string, string) {
	t.Helper()
	now := time.Now()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "messageverificationcerts.paypal.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	certFile, caFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-ca.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600))
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	return key, certFile, caFile
}

func (k providerKeys) config(certFile string) string {
	return fmt.Sprintf(`
ingest:
  max_body_bytes: 65536
  claim_timeout: 5s
providers:
  - {name: paddle, scheme: paddle, secrets_env: [T_PADDLE]}
  - {name: square, scheme: square, secrets_env: [T_SQUARE], notification_url: %q}
  - {name: easypost, scheme: easypost, secrets_env: [T_EASYPOST]}
  - {name: adyen, scheme: adyen, secrets_env: [T_ADYEN]}
  - {name: paypal, scheme: paypal, webhook_id: %s, cert_file: %q, ca_file: %q}
  - name: discord
    scheme: ed25519
    public_keys_env: [T_DISCORD]
    header: X-Signature-Ed25519
    timestamp_header: X-Signature-Timestamp
    id_from: json:id
    type_from: json:type
  - name: sendgrid
    scheme: ecdsa
    public_keys_env: [T_SENDGRID]
    header: X-Twilio-Email-Event-Webhook-Signature
    timestamp_header: X-Twilio-Email-Event-Webhook-Timestamp
    id_from: json:sg_event_id
    type_from: json:event
  - {name: connect, scheme: stripe, secrets_env: [T_STRIPE], scope_from: "header:Stripe-Account"}
  - {name: adyen-merchants, scheme: adyen, secrets_env: [T_ADYEN], scope_from: "json:notificationItems.0.NotificationRequestItem.merchantAccountCode"}
  - name: discord-header-id
    scheme: ed25519
    public_keys_env: [T_DISCORD]
    header: X-Signature-Ed25519
    timestamp_header: X-Signature-Timestamp
    id_from: header:X-Interaction-Id
routes:
  - {name: paddle-all, provider: paddle, events: ["*"], url: "http://127.0.0.1:1/p"}
  - {name: square-all, provider: square, events: ["*"], url: "http://127.0.0.1:1/s"}
  - {name: easypost-all, provider: easypost, events: ["*"], url: "http://127.0.0.1:1/e"}
  - {name: adyen-all, provider: adyen, events: ["*"], url: "http://127.0.0.1:1/a"}
  - {name: paypal-all, provider: paypal, events: ["*"], url: "http://127.0.0.1:1/pp"}
  - {name: discord-all, provider: discord, events: ["*"], url: "http://127.0.0.1:1/d"}
  - {name: sendgrid-all, provider: sendgrid, events: ["*"], url: "http://127.0.0.1:1/sg"}
  - {name: connect-all, provider: connect, events: ["*"], url: "http://127.0.0.1:1/c"}
  - {name: discord-header-all, provider: discord-header-id, events: ["*"], url: "http://127.0.0.1:1/dh"}
`, squareURL, paypalWebhookID, certFile, k.caFile)
}

func (k providerKeys) env() map[string]string {
	der, _ := x509.MarshalPKIXPublicKey(&k.ec.PublicKey)
	return map[string]string{
		"T_PADDLE":   paddleSecret,
		"T_SQUARE":   squareKey,
		"T_EASYPOST": easyPostSecret,
		"T_ADYEN":    adyenKey,
		"T_DISCORD":  hex.EncodeToString(k.ed.Public().(ed25519.PublicKey)),
		"T_SENDGRID": base64.StdEncoding.EncodeToString(der),
	}
}

func hmacHex(key string, parts ...string) string {
	return hex.EncodeToString(hmacSHA256(key, []byte(strings.Join(parts, ""))))
}

func signPaddle(secret string, at time.Time, body []byte) request {
	ts := fmt.Sprint(at.Unix())
	return request{provider: "paddle", body: body, header: http.Header{
		"Paddle-Signature": {"ts=" + ts + ";h1=" + hmacHex(secret, ts, ":", string(body))},
	}}
}

func paddleEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"event_id":%q,"event_type":"transaction.completed","occurred_at":"2024-03-20T10:07:35Z","data":{"id":"txn_1"}}`, id))
}

func signSquare(key string, body []byte) request {
	return request{provider: "square", body: body, header: http.Header{
		"X-Square-Hmacsha256-Signature": {base64.StdEncoding.EncodeToString(hmacSHA256(key, append([]byte(squareURL), body...)))},
	}}
}

func squareEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"merchant_id":"MLEFBHHSJGVHD","type":"payment.updated","event_id":%q,"created_at":"2024-07-13T20:30:59Z","data":{"type":"payment","id":"pay_1"}}`, id))
}

// signEasyPost keys the HMAC with the NFKD form of the secret, as
// EasyPost does: e followed by a combining acute accent.
func signEasyPost(body []byte) request {
	return request{provider: "easypost", body: body, header: http.Header{
		"X-Hmac-Signature": {"hmac-sha256-hex=" + hmacHex("se\u0301cret", string(body))},
	}}
}

func easyPostEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"Event","description":"tracker.updated","result":{"id":"trk_1","object":"Tracker"}}`, id))
}

// adyenItem is a NotificationRequestItem signed as Adyen signs it.
func adyenItem(t *testing.T, key, psp, code, merchant string) map[string]any {
	t.Helper()
	raw, err := hex.DecodeString(key)
	require.NoError(t, err)
	data := strings.Join([]string{psp, "", merchant, "order-1", "1000", "EUR", code, "true"}, ":")
	return map[string]any{
		"pspReference": psp, "merchantAccountCode": merchant, "merchantReference": "order-1",
		"amount": map[string]any{"value": 1000, "currency": "EUR"}, "eventCode": code, "success": "true",
		"additionalData": map[string]any{"hmacSignature": base64.StdEncoding.EncodeToString(hmacSHA256(string(raw), []byte(data)))},
	}
}

func adyenRequest(t *testing.T, provider string, items ...map[string]any) request {
	t.Helper()
	wrapped := make([]any, len(items))
	for i, it := range items {
		wrapped[i] = map[string]any{"NotificationRequestItem": it}
	}
	body, err := json.Marshal(map[string]any{"live": "false", "notificationItems": wrapped})
	require.NoError(t, err)
	return request{provider: provider, body: body, header: http.Header{}}
}

func (k providerKeys) signPayPal(t *testing.T, key *rsa.PrivateKey, at time.Time, body []byte) request {
	t.Helper()
	ts := at.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("tid-%d|%s|%s|%d", at.UnixNano(), ts, paypalWebhookID, crc32.ChecksumIEEE(body))
	d := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	require.NoError(t, err)
	return request{provider: "paypal", body: body, header: http.Header{
		"Paypal-Transmission-Id":   {fmt.Sprintf("tid-%d", at.UnixNano())},
		"Paypal-Transmission-Time": {ts},
		"Paypal-Transmission-Sig":  {base64.StdEncoding.EncodeToString(sig)},
		"Paypal-Auth-Algo":         {"SHA256withRSA"},
		"Paypal-Cert-Url":          {"https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"},
	}}
}

func paypalEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"event_version":"1.0","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"42311647XV020574X"}}`, id))
}

func (k providerKeys) signDiscord(key ed25519.PrivateKey, at time.Time, body []byte) request {
	ts := fmt.Sprint(at.Unix())
	return request{provider: "discord", body: body, header: http.Header{
		"X-Signature-Ed25519":   {hex.EncodeToString(ed25519.Sign(key, append([]byte(ts), body...)))},
		"X-Signature-Timestamp": {ts},
	}}
}

func (k providerKeys) signSendGrid(t *testing.T, key *ecdsa.PrivateKey, at time.Time, body []byte) request {
	t.Helper()
	ts := fmt.Sprint(at.Unix())
	d := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, d[:])
	require.NoError(t, err)
	return request{provider: "sendgrid", body: body, header: http.Header{
		"X-Twilio-Email-Event-Webhook-Signature": {base64.StdEncoding.EncodeToString(sig)},
		"X-Twilio-Email-Event-Webhook-Timestamp": {ts},
	}}
}

func TestProviderSchemesEndToEnd(t *testing.T) {
	t.Parallel()
	keys := newProviderKeys(t)
	db := dbtest.NewDB(t)
	s := startWith(t, db.URL, keys.config(keys.certFile), keys.env())
	now := time.Now()
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	strangerKey, _, _ := issuePayPalCert(t, t.TempDir(), "stranger")

	discordBody := func(id string) []byte { return []byte(fmt.Sprintf(`{"id":%q,"type":"2","token":"t"}`, id)) }
	sendGridBody := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"sg_event_id":%q,"event":"delivered","email":"a@example.com"}`, id))
	}

	type scheme struct {
		provider, id, typ string
		valid             request
		wrongSignature    request
		stale             *request // nil where the scheme signs no timestamp
		missingID         request
	}
	ptr := func(r request) *request { return &r }
	schemes := []scheme{
		{
			provider: "paddle", id: "evt_01hsdn97563968dy0szkmgjwh3", typ: "transaction.completed",
			valid:          signPaddle(paddleSecret, now, paddleEvent("evt_01hsdn97563968dy0szkmgjwh3")),
			wrongSignature: signPaddle("pdl_ntfset_wrong", now, paddleEvent("evt_wrong")),
			stale:          ptr(signPaddle(paddleSecret, now.Add(-time.Hour), paddleEvent("evt_stale"))),
			missingID:      signPaddle(paddleSecret, now, []byte(`{"event_type":"transaction.completed"}`)),
		},
		{
			provider: "square", id: "ac3ac95b-f97d-458c-a6e6-18981597e05f", typ: "payment.updated",
			valid:          signSquare(squareKey, squareEvent("ac3ac95b-f97d-458c-a6e6-18981597e05f")),
			wrongSignature: signSquare("MCmhFRxGX82xMwg5FsaoQA", squareEvent("sq_wrong")),
			missingID:      signSquare(squareKey, []byte(`{"type":"payment.updated"}`)),
		},
		{
			provider: "easypost", id: "evt_3c1a9a7e5b", typ: "tracker.updated",
			valid:          signEasyPost(easyPostEvent("evt_3c1a9a7e5b")),
			wrongSignature: request{provider: "easypost", body: easyPostEvent("evt_wrong"), header: http.Header{"X-Hmac-Signature": {"hmac-sha256-hex=" + hmacHex(easyPostSecret, string(easyPostEvent("evt_wrong")))}}},
			missingID:      signEasyPost([]byte(`{"description":"tracker.updated"}`)),
		},
		{
			provider: "adyen", id: "7914073381342284:AUTHORISATION", typ: "AUTHORISATION",
			valid:          adyenRequest(t, "adyen", adyenItem(t, adyenKey, "7914073381342284", "AUTHORISATION", "TestMerchant")),
			wrongSignature: adyenRequest(t, "adyen", adyenItem(t, "00"+adyenKey[2:], "7914073381342285", "AUTHORISATION", "TestMerchant")),
			missingID:      adyenRequest(t, "adyen", adyenItem(t, adyenKey, "", "AUTHORISATION", "TestMerchant")),
		},
		{
			provider: "paypal", id: "WH-2WR32451HC0233532-67976317FL4543714", typ: "PAYMENT.CAPTURE.COMPLETED",
			valid:          keys.signPayPal(t, keys.paypal, now, paypalEvent("WH-2WR32451HC0233532-67976317FL4543714")),
			wrongSignature: keys.signPayPal(t, strangerKey, now, paypalEvent("WH-wrong")),
			stale:          ptr(keys.signPayPal(t, keys.paypal, now.Add(-time.Hour), paypalEvent("WH-stale"))),
			missingID:      keys.signPayPal(t, keys.paypal, now, []byte(`{"event_type":"PAYMENT.CAPTURE.COMPLETED"}`)),
		},
		{
			provider: "discord", id: "1114461711931797504", typ: "2",
			valid:          keys.signDiscord(keys.ed, now, discordBody("1114461711931797504")),
			wrongSignature: keys.signDiscord(otherEd, now, discordBody("111")),
			stale:          ptr(keys.signDiscord(keys.ed, now.Add(-time.Hour), discordBody("112"))),
			missingID:      keys.signDiscord(keys.ed, now, []byte(`{"type":"1"}`)),
		},
		{
			provider: "sendgrid", id: "ZGVsaXZlcmVkLTAtMjQ", typ: "delivered",
			valid:          keys.signSendGrid(t, keys.ec, now, sendGridBody("ZGVsaXZlcmVkLTAtMjQ")),
			wrongSignature: keys.signSendGrid(t, otherEC, now, sendGridBody("sg_wrong")),
			stale:          ptr(keys.signSendGrid(t, keys.ec, now.Add(-time.Hour), sendGridBody("sg_stale"))),
			missingID:      keys.signSendGrid(t, keys.ec, now, []byte(`{"event":"delivered"}`)),
		},
	}
	for _, sc := range schemes {
		t.Run(sc.provider, func(t *testing.T) {
			r := s.post(t, sc.valid)
			require.Equal(t, http.StatusOK, r.status, "%v", r.body)
			require.Equal(t, accepted, r.body)
			c, ok := s.claimRow(t, sc.provider, sc.id)
			require.True(t, ok, "claimed under %s/%s", sc.provider, sc.id)
			require.Equal(t, sc.typ, c.EventType)
			require.Equal(t, sc.valid.body, c.Payload)
			require.Equal(t, map[string]string{sc.provider + "-all": "processing"}, s.deliveries(t, sc.provider, sc.id))
			require.Equal(t, duplicate, s.post(t, sc.valid).body, "the same request again is a duplicate")

			rejected := []struct {
				name   string
				req    *request
				status int
			}{
				{"wrong signature", &sc.wrongSignature, http.StatusUnauthorized},
				{"stale timestamp", sc.stale, http.StatusUnauthorized},
				{"missing id", &sc.missingID, http.StatusBadRequest},
			}
			for _, rj := range rejected {
				if rj.req == nil {
					continue
				}
				claims := s.claims(t)
				r := s.post(t, *rj.req)
				require.Equal(t, rj.status, r.status, "%s: %v", rj.name, r.body)
				require.NotEmpty(t, r.body["error"], rj.name)
				require.Equal(t, claims, s.claims(t), "%s: nothing claimed", rj.name)
			}
		})
	}

	t.Run("adyen: several items in one request are refused whole", func(t *testing.T) {
		claims := s.claims(t)
		r := s.post(t, adyenRequest(t, "adyen",
			adyenItem(t, adyenKey, "8815329842815468", "AUTHORISATION", "TestMerchant"),
			adyenItem(t, adyenKey, "8815329842815469", "AUTHORISATION", "TestMerchant")))
		require.Equal(t, http.StatusBadRequest, r.status)
		require.Equal(t, "body has 2 notification items; hookgate claims one per request, as Adyen sends them", r.body["error"])
		require.Equal(t, claims, s.claims(t))
	})

	t.Run("adyen: same PSP reference, another event code, is another claim", func(t *testing.T) {
		r := s.post(t, adyenRequest(t, "adyen", adyenItem(t, adyenKey, "7914073381342284", "CAPTURE", "TestMerchant")))
		require.Equal(t, accepted, r.body)
		_, ok := s.claimRow(t, "adyen", "7914073381342284:CAPTURE")
		require.True(t, ok)
	})

	t.Run("scope_from: two accounts get two claims, the same account one", func(t *testing.T) {
		body := stripeEvent("evt_connect_1", "invoice.paid")
		account := func(acct string) request {
			req := signStripe(body, stripeSecret, time.Now())
			req.provider = "connect"
			if acct != "" {
				req.header.Set("Stripe-Account", acct)
			}
			return req
		}
		require.Equal(t, accepted, s.post(t, account("acct_A")).body)
		require.Equal(t, accepted, s.post(t, account("acct_B")).body)
		require.Equal(t, duplicate, s.post(t, account("acct_A")).body)
		for _, id := range []string{"acct_A:evt_connect_1", "acct_B:evt_connect_1"} {
			_, ok := s.claimRow(t, "connect", id)
			require.True(t, ok, id)
		}
		require.Equal(t, 2, s.count(t, `SELECT count(*) FROM webhook_event_claims WHERE provider = 'connect'`))
		claims := s.claims(t)
		r := s.post(t, account(""))
		require.Equal(t, http.StatusBadRequest, r.status)
		require.Equal(t, "scope (header:Stripe-Account) is missing", r.body["error"])
		require.Equal(t, claims, s.claims(t))
	})

	t.Run("ed25519 with a header id: the replay guard is on by default", func(t *testing.T) {
		req := keys.signDiscord(keys.ed, time.Now(), discordBody("body-1"))
		req.provider = "discord-header-id"
		req.header.Set("X-Interaction-Id", "int_1")
		require.Equal(t, accepted, s.post(t, req).body)
		// The captured request, re-sent under an id of the sender's choosing:
		// the signature still verifies (it does not cover the header).
		replay := req
		replay.header = req.header.Clone()
		replay.header.Set("X-Interaction-Id", "int_2")
		require.Equal(t, duplicate, s.post(t, replay).body)
		_, ok := s.claimRow(t, "discord-header-id", "int_2")
		require.False(t, ok, "the replay mints no event")
	})

	t.Run("scope_from on adyen: one PSP reference under two merchant accounts", func(t *testing.T) {
		for _, merchant := range []string{"MerchantEU", "MerchantUS", "MerchantEU"} {
			s.post(t, adyenRequest(t, "adyen-merchants", adyenItem(t, adyenKey, "9914073381342284", "AUTHORISATION", merchant)))
		}
		require.Equal(t, 2, s.count(t, `SELECT count(*) FROM webhook_event_claims WHERE provider = 'adyen-merchants'`))
		for _, id := range []string{"MerchantEU:9914073381342284:AUTHORISATION", "MerchantUS:9914073381342284:AUTHORISATION"} {
			_, ok := s.claimRow(t, "adyen-merchants", id)
			require.True(t, ok, id)
		}
	})
}

// TestProviderKeysRefusedAtStart: a PayPal certificate outside the
// configured CA, and a public key of the wrong type, stop ingest at start
// with one line naming the key.
func TestProviderKeysRefusedAtStart(t *testing.T) {
	t.Parallel()
	keys := newProviderKeys(t)
	dir := t.TempDir()
	// The verifiers are built once the database answers.
	db := dbtest.NewDB(t)
	der, err := x509.MarshalPKIXPublicKey(&keys.ec.PublicKey)
	require.NoError(t, err)
	ecKey := base64.StdEncoding.EncodeToString(der)
	edKey := hex.EncodeToString(keys.ed.Public().(ed25519.PublicKey))

	for _, tc := range []struct {
		name, config string
		env          map[string]string
		want         string
	}{
		{"paypal certificate outside the CA", keys.config(keys.strangerCert), nil,
			`providers[4] (paypal): cert_file: certificate "messageverificationcerts.paypal.com" in ` + keys.strangerCert + " does not chain to ca_file"},
		{"ECDSA key given to ed25519", keys.config(keys.certFile), map[string]string{"T_DISCORD": ecKey},
			"providers[5].public_keys_env[0]: environment variable T_DISCORD is an ECDSA P-256 key, not an Ed25519 public key"},
		{"Ed25519 key given to ecdsa", keys.config(keys.certFile), map[string]string{"T_SENDGRID": edKey},
			"providers[6].public_keys_env[0]: environment variable T_SENDGRID is an Ed25519 key, not an ECDSA P-256 public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			require.NoError(t, os.WriteFile(cfg, []byte(tc.config), 0o600))
			env := testEnv(db.URL)
			for k, v := range keys.env() {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			var stderr bytes.Buffer
			err := run(context.Background(), []string{"ingest", "--config", cfg, "--listen", "127.0.0.1:0"},
				func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
			require.Error(t, err)
			require.Equal(t, 1, cli.Exit("ingest", err, &stderr))
			require.Contains(t, stderr.String(), tc.want)
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"))
			require.NotContains(t, stderr.String(), ecKey[:24])
		})
	}
}
