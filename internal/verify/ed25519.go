package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// ed25519Check parses the Ed25519 public keys and returns the check of the
// ed25519 scheme: pure Ed25519 (RFC 8032) over timestamp + body, as
// Discord signs interactions.
func ed25519Check(keys [][]byte) (func(ts, body, sig []byte) bool, error) {
	pubs := make([]ed25519.PublicKey, len(keys))
	for i, k := range keys {
		pub, err := parseEd25519Key(k)
		if err != nil {
			return nil, fmt.Errorf("public key %d of %d %w", i+1, len(keys), err)
		}
		pubs[i] = pub
	}
	return func(ts, body, sig []byte) bool {
		if len(sig) != ed25519.SignatureSize {
			return false
		}
		msg := make([]byte, 0, len(ts)+len(body))
		msg = append(append(msg, ts...), body...)
		ok := false
		for _, pub := range pubs {
			// Every key is tried, so the time taken does not say which matched.
			if ed25519.Verify(pub, msg, sig) {
				ok = true
			}
		}
		return ok
	}, nil
}

// parseEd25519Key reads an Ed25519 public key: its 32 bytes in hex (as
// Discord shows it) or base64, or a PEM or base64-DER PKIX public key.
// A key of another type is refused with a message that names the type.
func parseEd25519Key(key []byte) (ed25519.PublicKey, error) {
	text := strings.TrimSpace(string(key))
	if b, err := hex.DecodeString(text); err == nil && len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	if b, err := base64.StdEncoding.DecodeString(text); err == nil && len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	pub, err := parsePKIX(key)
	if err != nil {
		return nil, fmt.Errorf("is not an Ed25519 public key: it is not 32 bytes in hex or base64, and %w", err)
	}
	k, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("is %s, not an Ed25519 public key", keyKind(pub))
	}
	return k, nil
}
