package idemkey_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/idemkey"
)

func TestOf(t *testing.T) {
	t.Parallel()

	t.Run("MatchesTheDocumentedFormula", func(t *testing.T) {
		t.Parallel()
		// printf 'stripe\nevt_1\nship-order' | sha256sum
		require.Equal(t, "hg1_23901ac241a6890ac186daab3a7386a8b4d0ebfbd482b5580827eeea3f0dbf78",
			idemkey.Of("stripe", "evt_1", "ship-order"))
	})

	t.Run("IsPureAndFitsTheHeaderLimit", func(t *testing.T) {
		t.Parallel()
		longID := strings.Repeat("x", 255)
		k := idemkey.Of("shopify", longID, "ship-order")
		require.Equal(t, k, idemkey.Of("shopify", longID, "ship-order"))
		require.Regexp(t, regexp.MustCompile(`^hg1_[0-9a-f]{64}$`), k)
		require.Len(t, k, 68)
		require.LessOrEqual(t, len(k), 255)
	})

	t.Run("DistinctDeliveriesGetDistinctKeys", func(t *testing.T) {
		t.Parallel()
		triples := [][3]string{
			{"stripe", "evt_1", "ship-order"},
			{"stripe", "evt_1", "send-email"}, // same event, another route
			{"stripe", "evt_2", "ship-order"}, // another event
			{"github", "evt_1", "ship-order"}, // same id under another provider
			{"stripe", "evt_1ship", "-order"}, // boundaries shifted
			{"stripe", "evt_", "1ship-order"},
			{"stripee", "vt_1", "ship-order"},
		}
		seen := map[string][3]string{}
		for _, tr := range triples {
			k := idemkey.Of(tr[0], tr[1], tr[2])
			prev, dup := seen[k]
			require.False(t, dup, "%v and %v share key %s", prev, tr, k)
			seen[k] = tr
		}
	})
}
