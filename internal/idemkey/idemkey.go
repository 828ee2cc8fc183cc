// Package idemkey is the downstream Idempotency-Key formula, a pure function
// of a delivery's identity that the claim store, the route programs and the
// worker share without importing one another for it.
package idemkey

import (
	"crypto/sha256"
	"encoding/hex"
)

// Version prefixes every key, so that a change of the formula would show in
// the keys themselves.
const Version = "hg1"

// Of returns the downstream Idempotency-Key of the delivery of an event of
// provider, with id eventID, to route:
//
//	"hg1_" + lowercase hex of SHA-256(provider + "\n" + eventID + "\n" + route)
//
// Every attempt, retry, reopen, restart and replica sends the same key, and a
// downstream that remembers keys performs the effect once. The newline
// separator cannot occur in a provider or route name, nor in an event id
// (printable ASCII only), so distinct triples never hash the same input. The
// key is always 68 characters. Renaming a route changes the keys of its
// deliveries.
func Of(provider, eventID, route string) string {
	sum := sha256.Sum256([]byte(provider + "\n" + eventID + "\n" + route))
	return Version + "_" + hex.EncodeToString(sum[:])
}
