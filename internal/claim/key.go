package claim

import "github.com/hookgate/hookgate/internal/idemkey"

// EventKey identifies one claim: an event of a provider.
type EventKey struct{ Provider, EventID string }

func (k EventKey) String() string { return k.Provider + "/" + k.EventID }

// Key identifies one delivery: a claim and one of its routes.
type Key struct{ Provider, EventID, Route string }

func (k Key) String() string { return k.Provider + "/" + k.EventID + "/" + k.Route }

// IdempotencyKey returns the downstream Idempotency-Key of the delivery k
// (idemkey.Of: the formula, its version and its tests live there).
func (k Key) IdempotencyKey() string { return idemkey.Of(k.Provider, k.EventID, k.Route) }
