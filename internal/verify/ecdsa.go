package verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"errors"
	"fmt"
)

// ecdsaCheck parses the ECDSA P-256 public keys and returns the check of
// the ecdsa scheme: an ASN.1 DER signature of SHA-256(timestamp + body),
// as SendGrid signs its event webhook.
func ecdsaCheck(keys [][]byte) (func(ts, body, sig []byte) bool, error) {
	pubs := make([]*ecdsa.PublicKey, len(keys))
	for i, k := range keys {
		pub, err := parseECDSAKey(k)
		if err != nil {
			return nil, fmt.Errorf("public key %d of %d %w", i+1, len(keys), err)
		}
		pubs[i] = pub
	}
	return func(ts, body, sig []byte) bool {
		d := sha256.New()
		d.Write(ts)
		d.Write(body)
		digest := d.Sum(nil)
		ok := false
		for _, pub := range pubs {
			if ecdsa.VerifyASN1(pub, digest, sig) {
				ok = true
			}
		}
		return ok
	}, nil
}

// parseECDSAKey reads a PKIX public key, PEM or base64 DER (SendGrid shows
// the latter), which must be ECDSA on P-256.
func parseECDSAKey(key []byte) (*ecdsa.PublicKey, error) {
	if _, err := parseEd25519Key(key); err == nil {
		return nil, errors.New("is an Ed25519 key, not an ECDSA P-256 public key")
	}
	pub, err := parsePKIX(key)
	if err != nil {
		return nil, fmt.Errorf("is not an ECDSA P-256 public key: it %w", err)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("is %s, not an ECDSA P-256 public key", keyKind(pub))
	}
	return k, nil
}
