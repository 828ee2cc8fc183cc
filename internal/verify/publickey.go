package verify

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// publicKeyVerifier verifies the public-key schemes, ed25519 and ecdsa: a
// signature in a header of the sender's choosing over timestamp + body (no
// separator), the timestamp in another header as unix seconds, checked
// against the tolerance. It is what Discord interactions (Ed25519,
// X-Signature-Ed25519 and X-Signature-Timestamp) and SendGrid's signed
// event webhook (ECDSA P-256, X-Twilio-Email-Event-Webhook-Signature and
// -Timestamp) send. The id and type are read as for hmac (id_from,
// type_from); no ObjectID.
type publicKeyVerifier struct {
	// check reports whether sig is a signature of the timestamp and body
	// under any configured key; each implementation tries every key.
	check  func(ts, body, sig []byte) bool
	header string
	decode func(string) ([]byte, bool)
	signedEvent
}

// maxEncodedSignature bounds the signature header decoded: an Ed25519
// signature is 64 bytes, a DER ECDSA P-256 one at most 72.
const maxEncodedSignature = 256

// newPublicKeyVerifier parses the keys and the header settings.
func newPublicKeyVerifier(c Config, keys [][]byte, tolerance time.Duration) (*publicKeyVerifier, error) {
	v := &publicKeyVerifier{header: c.Header}
	switch c.Scheme {
	case schemeEd25519:
		check, err := ed25519Check(keys)
		if err != nil {
			return nil, err
		}
		v.check = check
	default:
		check, err := ecdsaCheck(keys)
		if err != nil {
			return nil, err
		}
		v.check = check
	}
	if c.Header == "" {
		return nil, fmt.Errorf("header is required for scheme %s (the header holding the signature)", c.Scheme)
	}
	if c.TimestampHeader == "" {
		return nil, fmt.Errorf("timestamp_header is required for scheme %s (the header holding the signed unix timestamp)", c.Scheme)
	}
	encoding := c.Encoding
	if encoding == "" {
		encoding = map[string]string{schemeEd25519: "hex", schemeECDSA: "base64"}[c.Scheme]
	}
	switch encoding {
	case "hex":
		v.decode = func(s string) ([]byte, bool) {
			if len(s) > maxEncodedSignature {
				return nil, false
			}
			b, err := hex.DecodeString(s)
			return b, err == nil
		}
	case "base64":
		v.decode = func(s string) ([]byte, bool) {
			if len(s) > maxEncodedSignature || strings.ContainsAny(s, "\r\n") {
				return nil, false
			}
			b, err := base64.StdEncoding.Strict().DecodeString(s)
			return b, err == nil
		}
	default:
		return nil, fmt.Errorf("encoding %q must be hex or base64 for scheme %s", c.Encoding, c.Scheme)
	}
	var err error
	if v.signedEvent, err = newSignedEvent(c, tolerance); err != nil {
		return nil, err
	}
	return v, nil
}

// Verify implements Verifier.
func (v *publicKeyVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	header := h.Get(v.header)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+v.header+" header")
	}
	sig, ok := v.decode(header)
	if !ok || len(sig) == 0 {
		return Event{}, unauthorized(reasonMalformedSignature, v.header+" header is not an encoded signature")
	}
	t, ts, err := v.readTimestamp(h)
	if err != nil {
		return Event{}, err
	}
	if !v.check([]byte(t), body, sig) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured public key")
	}
	return v.event(body, h, ts, now)
}

// CheckPublicKey reports why key is not a public key that scheme (ed25519
// or ecdsa) can verify with, or nil; for other schemes it is nil. The
// message names the kind of key found, never its bytes, so that config can
// refuse a wrong key at start naming the setting it came from.
func CheckPublicKey(scheme string, key []byte) error {
	switch scheme {
	case schemeEd25519:
		_, err := parseEd25519Key(key)
		return err
	case schemeECDSA:
		_, err := parseECDSAKey(key)
		return err
	}
	return nil
}

// parsePKIX reads a PEM "PUBLIC KEY" block, or base64 of its DER.
func parsePKIX(key []byte) (any, error) {
	text := strings.TrimSpace(string(key))
	var der []byte
	if strings.HasPrefix(text, "-----BEGIN") {
		block, _ := pem.Decode([]byte(text))
		if block == nil {
			return nil, errors.New("is not a valid PEM block")
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("is a PEM %q block, not PUBLIC KEY", block.Type)
		}
		der = block.Bytes
	} else {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, errors.New("is neither PEM nor base64")
		}
		der = b
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("is not a public key (PKIX, as PEM or base64 DER)")
	}
	return pub, nil
}

// keyKind names the type of a parsed public key for a message.
func keyKind(pub any) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return "an RSA key"
	case ed25519.PublicKey:
		return "an Ed25519 key"
	case *ecdsa.PublicKey:
		return "an ECDSA " + k.Curve.Params().Name + " key"
	case *ecdh.PublicKey:
		return "an X25519 key"
	}
	return "a key of another type"
}
