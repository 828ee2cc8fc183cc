package deliver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	"github.com/hookgate/hookgate/internal/config"
)

// routeClient returns the HTTP client of routes[i]: NewHTTPClient's for the
// route's concurrency, with the route's own transport so that its
// connections are reused by it alone, and its TLS settings when it has some. Certificates are always verified:
// against the system roots, or tls.ca_file instead. A file that cannot be
// read or parsed is an error naming its key.
func routeClient(i int, r config.Route, concurrency int) (*http.Client, error) {
	c := NewHTTPClient(concurrency)
	if !r.TLS.Set() {
		return c, nil
	}
	key := fmt.Sprintf("routes[%d].tls", i)
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.TLS.CAFile != "" {
		pem, err := os.ReadFile(r.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", key, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", key, r.TLS.CAFile)
		}
		tc.RootCAs = roots
	}
	if r.TLS.CertFile != "" {
		for _, f := range [][2]string{{"cert_file", r.TLS.CertFile}, {"key_file", r.TLS.KeyFile}} {
			if _, err := os.ReadFile(f[1]); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", key, f[0], err)
			}
		}
		cert, err := tls.LoadX509KeyPair(r.TLS.CertFile, r.TLS.KeyFile)
		if err != nil {
			// crypto/tls names the problem, never the key's bytes.
			return nil, fmt.Errorf("%s.cert_file, %s.key_file: not a certificate and its key: %w", key, key, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	c.Transport.(*http.Transport).TLSClientConfig = tc
	return c, nil
}

// NewHTTPClient returns the client for downstream calls: connections are
// kept for reuse up to concurrency per host, and redirects are answered
// rather than followed. Each attempt bounds itself with its route's timeout.
func NewHTTPClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(100, concurrency)
	t.MaxIdleConnsPerHost = max(2, concurrency)
	return &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
