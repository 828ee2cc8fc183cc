package claim

import (
	"crypto/sha256"
	"encoding/hex"
)

// EventKey identifies one claim: an event of a provider.
type EventKey struct{ Provider, EventID string }

func (k EventKey) String() string { return k.Provider + "/" + k.EventID }

// Key identifies one delivery: a claim and one of its routes.
type Key struct{ Provider, EventID, Route string }

func (k Key) String() string { return k.Provider + "/" + k.EventID + "/" + k.Route }

// IdempotencyKey returns the downstream Idempotency-Key of the delivery k:
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
func (k Key) IdempotencyKey() string {
	sum := sha256.Sum256([]byte(k.Provider + "\n" + k.EventID + "\n" + k.Route))
	return "hg1_" + hex.EncodeToString(sum[:])
}
