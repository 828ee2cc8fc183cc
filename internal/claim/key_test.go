package claim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestKeyIdempotencyKey: a delivery's key is the leaf's formula over its
// identity, byte for byte the key hookgate has always sent.
func TestKeyIdempotencyKey(t *testing.T) {
	t.Parallel()
	// printf 'stripe\nevt_1\nship-order' | sha256sum
	require.Equal(t, "hg1_23901ac241a6890ac186daab3a7386a8b4d0ebfbd482b5580827eeea3f0dbf78",
		claim.Key{Provider: "stripe", EventID: "evt_1", Route: "ship-order"}.IdempotencyKey())
}
