package verify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PayPal's delivery headers.
const (
	paypalTransmissionIDHeader   = "Paypal-Transmission-Id"
	paypalTransmissionTimeHeader = "Paypal-Transmission-Time"
	paypalTransmissionSigHeader  = "Paypal-Transmission-Sig"
	paypalAuthAlgoHeader         = "Paypal-Auth-Algo"
	paypalAuthAlgo               = "SHA256withRSA"
)

// Bounds on what PayPal sends: its documented schema caps the transmission
// id at 50 characters and the signature at 500; these leave room.
const (
	maxPayPalTransmissionID = 255
	maxPayPalSignature      = 1024
	maxPayPalCerts          = 16
)

// payPalVerifier verifies PayPal webhooks offline
// (https://developer.paypal.com/api/rest/webhooks/rest/): an RSA PKCS#1
// v1.5 SHA-256 signature (PAYPAL-TRANSMISSION-SIG, base64) over
// transmission_id|transmission_time|webhook_id|crc32(body), the CRC32
// (IEEE) in decimal, by the key of PayPal's signing certificate.
//
// PayPal names a certificate URL in PAYPAL-CERT-URL for the receiver to
// download. This never does: the certificates are read from cert_file at
// start, each must chain to ca_file, and the header is ignored, so the
// ingest path makes no network call and no request chooses a key. A
// signature is accepted under any configured certificate that is valid at
// the time of the request. PAYPAL-TRANSMISSION-TIME is checked against
// the tolerance once the signature is verified.
//
// The id is the body's id (WH-...), the type event_type, the ObjectID
// resource.id. The signature covers the body only through CRC32, which is
// not a cryptographic hash: someone holding a captured request could
// alter its body keeping the CRC32 and the signature, within the
// tolerance. The replay guard cannot help (an altered body is no longer
// byte-identical, and the unaltered one carries the same id), so it stays
// off; keep the tolerance short.
type payPalVerifier struct {
	certs     []*x509.Certificate
	webhookID string
	tolerance time.Duration
}

// newPayPalVerifier reads and checks the certificates.
func newPayPalVerifier(c Config, tolerance time.Duration) (*payPalVerifier, error) {
	switch {
	case c.WebhookID == "":
		return nil, errors.New("webhook_id is required for scheme paypal (the id PayPal gave the webhook)")
	case !ValidID(c.WebhookID) || strings.Contains(c.WebhookID, "|"):
		return nil, errors.New("webhook_id must be printable ASCII without spaces or |")
	case c.CertFile == "":
		return nil, errors.New("cert_file is required for scheme paypal (PayPal's signing certificate, a PEM file or a directory of them)")
	case c.CAFile == "":
		return nil, errors.New("ca_file is required for scheme paypal (the CA bundle PayPal's certificate must chain to)")
	}
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate", c.CAFile)
	}
	certs, err := readCertificates(c.CertFile)
	if err != nil {
		return nil, err
	}
	intermediates := x509.NewCertPool()
	var leaves []*x509.Certificate
	for _, cert := range certs {
		if cert.IsCA {
			intermediates.AddCert(cert.Certificate)
			continue
		}
		leaves = append(leaves, cert.Certificate)
	}
	if len(leaves) == 0 {
		return nil, fmt.Errorf("cert_file %s holds no signing (non-CA) certificate", c.CertFile)
	}
	if len(leaves) > maxPayPalCerts {
		return nil, fmt.Errorf("cert_file %s holds %d signing certificates; at most %d are tried per request", c.CertFile, len(leaves), maxPayPalCerts)
	}
	for _, cert := range certs {
		if cert.IsCA {
			continue
		}
		if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("cert_file: certificate %q in %s has no RSA key", cert.Subject.CommonName, cert.file)
		}
		// The chain is checked as of the certificate's own start, so that a
		// directory may hold the next certificate before it is valid and the
		// last one after it expired; each request is checked against the
		// validity of the certificate that verifies it.
		_, err := cert.Verify(x509.VerifyOptions{
			Roots: roots, Intermediates: intermediates, CurrentTime: cert.NotBefore,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		})
		if err != nil {
			return nil, fmt.Errorf("cert_file: certificate %q in %s does not chain to ca_file: %v", cert.Subject.CommonName, cert.file, err)
		}
	}
	return &payPalVerifier{certs: leaves, webhookID: c.WebhookID, tolerance: tolerance}, nil
}

// fileCertificate is a certificate with the file it came from, for messages.
type fileCertificate struct {
	*x509.Certificate
	file string
}

// readCertificates reads every CERTIFICATE block of path, or of each
// regular file in path when it is a directory.
func readCertificates(path string) ([]fileCertificate, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cert_file: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("cert_file: %w", err)
		}
		files = files[:0]
		for _, e := range entries {
			// Kubernetes mounts secrets through ..data symlinks: follow
			// links, skip the dot entries.
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			full := filepath.Join(path, e.Name())
			if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() {
				files = append(files, full)
			}
		}
	}
	var certs []fileCertificate
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("cert_file: %w", err)
		}
		for {
			var block *pem.Block
			block, b = pem.Decode(b)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("cert_file: %s holds a certificate that does not parse: %v", f, err)
			}
			certs = append(certs, fileCertificate{Certificate: cert, file: f})
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("cert_file %s holds no PEM certificate", path)
	}
	return certs, nil
}

// Verify implements Verifier.
func (v *payPalVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	sigText := h.Get(paypalTransmissionSigHeader)
	if sigText == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+paypalTransmissionSigHeader+" header")
	}
	if algo := h.Get(paypalAuthAlgoHeader); algo != "" && algo != paypalAuthAlgo {
		return Event{}, unauthorized(reasonMalformedSignature, paypalAuthAlgoHeader+" header is not "+paypalAuthAlgo)
	}
	if len(sigText) > maxPayPalSignature {
		return Event{}, unauthorized(reasonMalformedSignature, paypalTransmissionSigHeader+" header is longer than a signature")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(sigText)
	if err != nil {
		return Event{}, unauthorized(reasonMalformedSignature, paypalTransmissionSigHeader+" header is not a base64 signature")
	}
	id := h.Get(paypalTransmissionIDHeader)
	if id == "" || len(id) > maxPayPalTransmissionID || strings.Contains(id, "|") {
		return Event{}, unauthorized(reasonMalformedSignature, "missing or malformed "+paypalTransmissionIDHeader+" header")
	}
	t := h.Get(paypalTransmissionTimeHeader)
	if t == "" {
		return Event{}, unauthorized(reasonMissingTimestamp, "missing "+paypalTransmissionTimeHeader+" header")
	}
	ts, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return Event{}, unauthorized(reasonMalformedTimestamp, paypalTransmissionTimeHeader+" header is not an RFC 3339 time")
	}

	d := sha256.New()
	d.Write([]byte(id + "|" + t + "|" + v.webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)))
	digest := d.Sum(nil)
	ok := false
	for _, cert := range v.certs {
		if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			continue
		}
		if rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, digest, sig) == nil {
			ok = true
		}
	}
	if !ok {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured certificate valid now")
	}
	if err := checkTolerance(ts, now, v.tolerance); err != nil {
		return Event{}, err
	}

	obj, err := parseObject(body)
	if err != nil {
		return Event{}, err
	}
	if err := checkUnambiguous(body, "id", "event_type"); err != nil {
		return Event{}, err
	}
	return withBody(normalize(fromJSON(obj, "id"), fromJSON(obj, "event_type"), fromJSON(obj, "resource.id")))(obj)
}
