package verify

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"hash/crc32"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// PayPal publishes no Go library and no test vector with a key one could
// sign with, so these tests build their own CA and signing certificate and
// sign as PayPal's "Integrate webhooks" guide describes: SHA256withRSA over
// transmission_id|transmission_time|webhook_id|crc32(body), the CRC32 in
// decimal, base64 in PAYPAL-TRANSMISSION-SIG.

const paypalWebhookID = "1JE4291016473214C"

// paypalPKI is a CA and a signing certificate it issued, written to files.
type paypalPKI struct {
	key      *rsa.PrivateKey
	certFile string
	caFile   string
	dir      string
}

// newPayPalPKI issues a signing certificate valid from notBefore to
// notAfter under a new CA.
func newPayPalPKI(tb testing.TB, notBefore, notAfter time.Time) paypalPKI {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(tb, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Test PayPal CA"},
		NotBefore: notBefore.Add(-time.Hour), NotAfter: notAfter.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(tb, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(tb, err)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(tb, err)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "messageverificationcerts.paypal.com"},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	require.NoError(tb, err)
	p := paypalPKI{key: key, dir: filepath.Join(dir, "certs"), certFile: filepath.Join(dir, "certs", "paypal.pem"), caFile: filepath.Join(dir, "ca.pem")}
	require.NoError(tb, os.Mkdir(p.dir, 0o700))
	require.NoError(tb, os.WriteFile(p.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600))
	require.NoError(tb, os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	return p
}

// sign returns PayPal's headers for body sent at ts.
func (p paypalPKI) sign(tb testing.TB, transmissionID string, ts time.Time, body []byte) http.Header {
	tb.Helper()
	t := ts.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("%s|%s|%s|%d", transmissionID, t, paypalWebhookID, crc32.ChecksumIEEE(body))
	d := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, d[:])
	require.NoError(tb, err)
	return headers(
		paypalTransmissionIDHeader, transmissionID,
		paypalTransmissionTimeHeader, t,
		paypalTransmissionSigHeader, base64.StdEncoding.EncodeToString(sig),
		paypalAuthAlgoHeader, paypalAuthAlgo,
		"Paypal-Cert-Url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77",
	)
}

func (p paypalPKI) config() Config {
	return Config{Scheme: "paypal", WebhookID: paypalWebhookID, CertFile: p.certFile, CAFile: p.caFile}
}

func TestPayPal(t *testing.T) {
	t.Parallel()

	now := testNow()
	pki := newPayPalPKI(t, now.Add(-24*time.Hour), now.Add(24*time.Hour))
	v, err := New(pki.config())
	require.NoError(t, err)
	dirConfig := pki.config()
	dirConfig.CertFile = pki.dir
	fromDir, err := New(dirConfig)
	require.NoError(t, err)
	stranger := newPayPalPKI(t, now.Add(-24*time.Hour), now.Add(24*time.Hour))

	body := []byte(`{"id":"WH-2WR32451HC0233532-67976317FL4543714","event_version":"1.0","create_time":"2024-07-16T18:03:30.000Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"42311647XV020574X","status":"COMPLETED"}}`)
	want := Event{ID: "WH-2WR32451HC0233532-67976317FL4543714", Type: "PAYMENT.CAPTURE.COMPLETED", ObjectID: "42311647XV020574X"}
	tid := "69cd13f0-d67a-11e5-baa3-778b53f4ae55"
	good := pki.sign(t, tid, now, body)
	noID := []byte(`{"event_type":"PAYMENT.CAPTURE.COMPLETED"}`)
	badID := []byte(`{"id":"WH 1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`)
	noType := []byte(`{"id":"WH-1"}`)

	cases := []verifyCase{
		{name: "signed", body: body, header: good, want: want},
		{name: "without PAYPAL-AUTH-ALGO", body: body, header: with(good, paypalAuthAlgoHeader, ""), want: want},

		{name: "signed by a certificate not configured", body: body, header: stranger.sign(t, tid, now, body), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "body changed", body: flipByte(body, 20), header: good, wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "transmission id changed", body: body, header: with(good, paypalTransmissionIDHeader, "69cd13f0-d67a-11e5-baa3-778b53f4ae56"), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "time changed", body: body, header: with(good, paypalTransmissionTimeHeader, now.Add(time.Second).UTC().Format(time.RFC3339)), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "signature missing", body: body, header: with(good, paypalTransmissionSigHeader, ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "signature not base64", body: body, header: with(good, paypalTransmissionSigHeader, "%%"), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "another algorithm", body: body, header: with(good, paypalAuthAlgoHeader, "SHA1withRSA"), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "transmission id missing", body: body, header: with(good, paypalTransmissionIDHeader, ""), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "time missing", body: body, header: with(good, paypalTransmissionTimeHeader, ""), wantErr: ErrUnauthorized, reason: "missing_timestamp"},
		{name: "time not RFC 3339", body: body, header: with(good, paypalTransmissionTimeHeader, "yesterday"), wantErr: ErrUnauthorized, reason: "malformed_timestamp"},
		{name: "stale", body: body, header: pki.sign(t, tid, now.Add(-6*time.Minute), body), wantErr: ErrUnauthorized, reason: "timestamp_out_of_tolerance"},
		{name: "certificate expired by now", body: body, header: pki.sign(t, tid, now.Add(25*time.Hour), body), now: now.Add(25 * time.Hour), wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "id missing", body: noID, header: pki.sign(t, tid, now, noID), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "id malformed", body: badID, header: pki.sign(t, tid, now, badID), wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "event_type missing", body: noType, header: pki.sign(t, tid, now, noType), wantErr: ErrInvalid, reason: "missing_type"},
	}
	runVerifyCases(t, v, cases)
	runVerifyCases(t, fromDir, cases[:1])
}

func TestPayPalCertificateOutsideTheCAIsRefusedAtStart(t *testing.T) {
	t.Parallel()

	now := time.Now()
	ours := newPayPalPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	stranger := newPayPalPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	c := ours.config()
	c.CertFile = stranger.certFile
	_, err := New(c)
	require.ErrorContains(t, err, `cert_file: certificate "messageverificationcerts.paypal.com" in `+stranger.certFile+" does not chain to ca_file")

	// A directory with one certificate from elsewhere is refused whole.
	require.NoError(t, os.WriteFile(filepath.Join(ours.dir, "other.pem"), mustRead(t, stranger.certFile), 0o600))
	c = ours.config()
	c.CertFile = ours.dir
	_, err = New(c)
	require.ErrorContains(t, err, "does not chain to ca_file")
}

func TestPayPalSettings(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pki := newPayPalPKI(t, now.Add(-time.Hour), now.Add(time.Hour))
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.WebhookID = "" }, "webhook_id is required for scheme paypal"},
		{func(c *Config) { c.WebhookID = "a|b" }, "webhook_id must be printable ASCII"},
		{func(c *Config) { c.CertFile = "" }, "cert_file is required"},
		{func(c *Config) { c.CAFile = "" }, "ca_file is required"},
		{func(c *Config) { c.CertFile = filepath.Join(pki.dir, "missing.pem") }, "cert_file: stat"},
		{func(c *Config) { c.CAFile = pki.dir + "/nothing" }, "ca_file: open"},
		{func(c *Config) { c.CertFile = pki.caFile }, "holds no signing (non-CA) certificate"},
		{func(c *Config) { c.Secrets = [][]byte{[]byte("x")} }, "scheme paypal takes no secrets"},
		{func(c *Config) { c.Scheme = "stripe"; c.Secrets = [][]byte{[]byte("x")} }, "webhook_id applies only to scheme paypal"},
	} {
		c := pki.config()
		tc.change(&c)
		_, err := New(c)
		require.ErrorContains(t, err, tc.want)
	}
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)
	return b
}
