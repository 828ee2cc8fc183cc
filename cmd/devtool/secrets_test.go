package main

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// secretsConfig names secrets of every kind: a Standard Webhooks provider,
// a Stripe provider with a rotation pair, a GitHub provider and a route's
// signing secret.
const secretsConfig = `
providers:
  - name: demo
    scheme: standard-webhooks
    secrets_env: [DEMO_WEBHOOK_SECRET]
  - name: stripe
    scheme: stripe
    secrets_env: [STRIPE_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET_PREVIOUS]
  - name: github
    scheme: github
    secrets_env: [GITHUB_WEBHOOK_SECRET]
routes:
  - name: demo-receiver
    provider: demo
    events: ["*"]
    url: http://127.0.0.1:9099/hooks/demo
    signing_secret_env: DEMO_RECEIVER_SIGNING_SECRET
`

func TestDemoSecrets(t *testing.T) {
	t.Parallel()

	cfg, err := config.Parse([]byte(secretsConfig))
	require.NoError(t, err)

	tests := []struct {
		name string
		set  map[string]string
		want map[string]string
	}{
		{
			name: "all unset",
			want: map[string]string{
				"DEMO_WEBHOOK_SECRET":            demoWebhookSecret,
				"STRIPE_WEBHOOK_SECRET":          demoStripeSecret,
				"STRIPE_WEBHOOK_SECRET_PREVIOUS": demoStripeSecret,
				"GITHUB_WEBHOOK_SECRET":          demoPlainSecret,
				"DEMO_RECEIVER_SIGNING_SECRET":   demoWebhookSecret,
			},
		},
		{
			name: "set ones are left alone",
			set: map[string]string{
				"DEMO_WEBHOOK_SECRET":   "whsec_bXktb3du",
				"GITHUB_WEBHOOK_SECRET": "github-secret-mine",
			},
			want: map[string]string{
				"STRIPE_WEBHOOK_SECRET":          demoStripeSecret,
				"STRIPE_WEBHOOK_SECRET_PREVIOUS": demoStripeSecret,
				"DEMO_RECEIVER_SIGNING_SECRET":   demoWebhookSecret,
			},
		},
		{
			name: "empty counts as unset",
			set: map[string]string{
				"DEMO_WEBHOOK_SECRET":            "",
				"STRIPE_WEBHOOK_SECRET":          "stripe-secret-now",
				"STRIPE_WEBHOOK_SECRET_PREVIOUS": "stripe-secret-before",
				"GITHUB_WEBHOOK_SECRET":          "github-secret-value",
				"DEMO_RECEIVER_SIGNING_SECRET":   "whsec_cg==",
			},
			want: map[string]string{"DEMO_WEBHOOK_SECRET": demoWebhookSecret},
		},
		{
			name: "all set",
			set: map[string]string{
				"DEMO_WEBHOOK_SECRET":            "whsec_bXktb3du",
				"STRIPE_WEBHOOK_SECRET":          "stripe-secret-now",
				"STRIPE_WEBHOOK_SECRET_PREVIOUS": "stripe-secret-before",
				"GITHUB_WEBHOOK_SECRET":          "github-secret-value",
				"DEMO_RECEIVER_SIGNING_SECRET":   "whsec_cg==",
			},
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := demoSecrets(cfg, func(name string) string { return tt.set[name] })
			require.Equal(t, tt.want, got)

			// The notice names what was defaulted and shows no value, neither
			// a demo one nor one from the environment.
			notice := demoSecretsNotice(got)
			for name := range got {
				require.Contains(t, notice, name)
			}
			for name, value := range tt.set {
				if value != "" {
					require.NotContains(t, notice, value)
				}
				if _, defaulted := got[name]; !defaulted {
					require.NotContains(t, notice, name)
				}
			}
			for _, value := range []string{demoWebhookSecret, demoStripeSecret, demoPlainSecret} {
				require.NotContains(t, notice, value)
			}
		})
	}
}

func TestDemoWebhookSecret(t *testing.T) {
	t.Parallel()

	// The constant is what it says it is, and the official library takes it.
	require.Equal(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("hookgate-local-demo-secret-32byt")), demoWebhookSecret)
	_, err := standardwebhooks.NewWebhook(demoWebhookSecret)
	require.NoError(t, err)
}

// TestDemoAdyenKeyIsHex: Adyen's key is hex, so its demo value must be, or
// ingest would refuse to start under `devtool run`.
func TestDemoAdyenKeyIsHex(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("providers:\n  - {name: adyen, scheme: adyen, secrets_env: [ADYEN_HMAC_KEY]}\n"))
	require.NoError(t, err)
	got := demoSecrets(cfg, func(string) string { return "" })
	require.Equal(t, map[string]string{"ADYEN_HMAC_KEY": demoAdyenKey}, got)
	key, err := hex.DecodeString(demoAdyenKey)
	require.NoError(t, err)
	require.Equal(t, demoPlainSecret, string(key))
}
