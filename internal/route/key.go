package route

import (
	"crypto/sha256"
	"encoding/hex"
)

// IdempotencyKey returns the downstream idempotency key of one delivery:
//
//	"hg1_" + lowercase hex of SHA-256(provider + "\n" + eventID + "\n" + route)
//
// It is a pure function of the delivery's identity, so every attempt, retry,
// reopen, restart and replica sends the same key, and a downstream that
// remembers keys performs the effect once. The newline separator cannot occur
// in a provider or route name, nor in an event id (printable ASCII only), so
// distinct triples never hash the same input. The key is always 68
// characters; "hg1" versions the formula, should it ever change. Renaming a
// route changes the keys of its deliveries.
func IdempotencyKey(provider, eventID, route string) string {
	sum := sha256.Sum256([]byte(provider + "\n" + eventID + "\n" + route))
	return "hg1_" + hex.EncodeToString(sum[:])
}
