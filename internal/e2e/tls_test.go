package e2e_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// pki is a test's own certificate authority with a server certificate for
// 127.0.0.1 and a client certificate, written as PEM files.
type pki struct {
	roots                     *x509.CertPool
	server                    tls.Certificate
	caFile, certFile, keyFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	p := &pki{roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)

	srvDER, srvKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}

	cliDER, cliKey := issue(3, "hookgate-e2e-client", x509.ExtKeyUsageClientAuth, nil)
	p.certFile = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	require.NoError(t, err)
	p.keyFile = write("client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

// mtlsServer is a downstream that accepts only clients with a certificate
// from p's CA, and remembers who called from which connection.
type mtlsServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns map[string]map[string]bool // path -> remote addrs
	peers []string                   // client certificate names
}

func newMTLSServer(t *testing.T, p *pki) *mtlsServer {
	m := &mtlsServer{conns: map[string]map[string]bool{}}
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.conns[r.URL.Path] == nil {
			m.conns[r.URL.Path] = map[string]bool{}
		}
		m.conns[r.URL.Path][r.RemoteAddr] = true
		m.peers = append(m.peers, r.TLS.PeerCertificates[0].Subject.CommonName)
		w.WriteHeader(http.StatusOK)
	}))
	m.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests are about
	m.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.roots,
		MinVersion:   tls.VersionTLS12,
	}
	m.StartTLS()
	t.Cleanup(m.Close)
	return m
}

func (m *mtlsServer) connections(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns[path])
}

func TestRouteOverMutualTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	bank := newMTLSServer(t, p)
	s := newStack(t, []route{
		{
			name: "bank", events: []string{"payout.created"}, url: bank.URL + "/pay",
			extra: "    tls: { ca_file: " + p.caFile + ", cert_file: " + p.certFile + ", key_file: " + p.keyFile + " }\n",
		},
		{
			name: "bank-nocert", events: []string{"payout.nocert"}, url: bank.URL + "/pay-nocert", maxAttempts: 2,
			extra: "    tls: { ca_file: " + p.caFile + " }\n",
		},
		{name: "bank-untrusted", events: []string{"payout.untrusted"}, url: bank.URL + "/pay-untrusted", maxAttempts: 2},
	})
	ingest, _ := s.ingest(), s.worker()

	t.Run("ClientCertificateIsPresentedAndConnectionsAreReused", func(t *testing.T) {
		for _, id := range []string{"evt_pay_1", "evt_pay_2", "evt_pay_3"} {
			s.claimed(ingest, event{id: id, typ: "payout.created"})
			s.waitStatus(id, claim.Completed, settle)
		}
		require.Equal(t, 1, bank.connections("/pay"), "three deliveries, one after the other, over one connection")
		bank.mu.Lock()
		defer bank.mu.Unlock()
		require.Equal(t, []string{"hookgate-e2e-client", "hookgate-e2e-client", "hookgate-e2e-client"}, bank.peers)
	})

	t.Run("MissingClientCertificateIsRetriedWithAClearReason", func(t *testing.T) {
		e := event{id: "evt_pay_nocert", typ: "payout.nocert"}
		s.claimed(ingest, e)
		_, ds := s.waitStatus(e.id, claim.Failed, settle)
		d := deliveryOf(t, ds, "bank-nocert")
		require.Equal(t, 2, d.AttemptCount, "a handshake failure is retryable")
		require.Equal(t, `attempts exhausted (2 of 2): TLS handshake failed: the downstream sent alert "certificate required" `+
			`(a client certificate it does not accept? see the route's tls.cert_file and tls.key_file)`, d.LastError)
	})

	t.Run("UnknownAuthorityIsRetriedWithAClearReason", func(t *testing.T) {
		e := event{id: "evt_pay_untrusted", typ: "payout.untrusted"}
		s.claimed(ingest, e)
		_, ds := s.waitStatus(e.id, claim.Failed, settle)
		d := deliveryOf(t, ds, "bank-untrusted")
		require.Equal(t, 2, d.AttemptCount)
		require.Equal(t, "attempts exhausted (2 of 2): TLS certificate not accepted: signed by an unknown authority (tls.ca_file names the CA to trust)", d.LastError)
	})
}
