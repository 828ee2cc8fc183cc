package verify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/verify"
)

// TestFetchedIsTheWebhooksEvent: an event as Stripe's API returns it is
// normalized to the event its signed webhook copy verifies to, scope and
// all, so that both are claimed under one key.
func TestFetchedIsTheWebhooksEvent(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","account":"acct_9","data":{"object":{"id":"in_1"}}}`)
	for _, scope := range []string{"", "json:account"} {
		c := verify.Config{Scheme: "stripe", Secrets: [][]byte{[]byte("whsec_test_secret")}, ScopeFrom: scope}
		v, err := verify.New(c)
		require.NoError(t, err)
		now := time.Now()
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_test_secret", Timestamp: now})
		h := map[string][]string{"Stripe-Signature": {signed.Header}}
		want, err := v.Verify(body, h, now)
		require.NoError(t, err)
		got, err := verify.Fetched(c, body)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := verify.Fetched(verify.Config{Scheme: "stripe", ScopeFrom: "header:X-Account"}, body)
	require.ErrorIs(t, err, verify.ErrInvalid)
	_, err = verify.Fetched(verify.Config{Scheme: "stripe"}, []byte(`{"id":"evt 1","type":"x"}`))
	require.ErrorIs(t, err, verify.ErrInvalid)
	_, err = verify.Fetched(verify.Config{Scheme: "github"}, body)
	require.Error(t, err)
}
