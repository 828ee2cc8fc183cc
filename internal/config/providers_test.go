package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProviderSchemes checks the keys of the payment and shipping schemes:
// what each requires, and that a key on the wrong scheme is named.
func TestProviderSchemes(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"paddle", `{name: p, scheme: paddle, secrets_env: [K]}`, nil},
		{"easypost", `{name: p, scheme: easypost, secrets_env: [K]}`, nil},
		{"adyen", `{name: p, scheme: adyen, secrets_env: [K], scope_from: "header:X-Merchant"}`, nil},
		{"square", `{name: p, scheme: square, secrets_env: [K], notification_url: "https://hooks.example/square"}`, nil},
		{"square without its URL", `{name: p, scheme: square, secrets_env: [K]}`,
			[]string{"providers[0].notification_url: is required for scheme square (the URL exactly as configured in Square)"}},
		{"square with a relative URL", `{name: p, scheme: square, secrets_env: [K], notification_url: /hooks}`,
			[]string{"providers[0].notification_url: must be an absolute http or https URL"}},
		{"paypal", `{name: p, scheme: paypal, webhook_id: 1JE4291016473214C, cert_file: /etc/paypal/certs, ca_file: /etc/paypal/ca.pem}`, nil},
		{"paypal bare", `{name: p, scheme: paypal, secrets_env: [K]}`, []string{
			"providers[0].secrets_env: does not apply to scheme paypal, which verifies with cert_file",
			"providers[0].webhook_id: is required for scheme paypal (the id PayPal gave the webhook)",
			"providers[0].cert_file: is required for scheme paypal (PayPal's signing certificate: a PEM file or a directory of them)",
			"providers[0].ca_file: is required for scheme paypal (the CA bundle PayPal's certificate must chain to)",
		}},
		{"ed25519", `{name: p, scheme: ed25519, public_keys_env: [K], header: X-Signature-Ed25519, timestamp_header: X-Signature-Timestamp, id_from: "json:id"}`, nil},
		{"ecdsa", `{name: p, scheme: ecdsa, public_keys_env: [K], header: X-Sig, timestamp_header: X-Ts, encoding: base64, id_from: "json:sg_event_id", type_from: "json:event"}`, nil},
		{"ed25519 bare", `{name: p, scheme: ed25519, secrets_env: [K], prefix: "v1="}`, []string{
			"providers[0].secrets_env: does not apply to scheme ed25519, which verifies with public_keys_env",
			"providers[0].public_keys_env: at least one environment variable name (or public_keys_file) is required for scheme ed25519",
			"providers[0].prefix: applies only to scheme hmac, not ed25519",
			"providers[0].header: is required for scheme ed25519",
			"providers[0].timestamp_header: is required for scheme ed25519 (the header holding the signed unix timestamp)",
			"providers[0].id_from: is required for scheme ed25519 (header:NAME or json:dotted.path)",
		}},
		{"keys on the wrong scheme", `{name: p, scheme: stripe, secrets_env: [K], public_keys_env: [P], notification_url: "https://x.example", cert_file: c.pem}`, []string{
			"providers[0].public_keys_env: applies only to scheme ed25519, ecdsa, not stripe",
			"providers[0].notification_url: applies only to scheme square, not stripe",
			"providers[0].cert_file: applies only to scheme paypal, not stripe",
		}},
		{"secrets from a file only", `{name: p, scheme: paddle, secrets_file: [/run/secrets/paddle]}`, nil},
		{"public keys from a file only", `{name: p, scheme: ed25519, public_keys_file: [/run/keys/discord], header: X-Sig, timestamp_header: X-Ts, id_from: "json:id"}`, nil},
		{"secrets file path empty", `{name: p, scheme: paddle, secrets_env: [K], secrets_file: [""]}`,
			[]string{`providers[0].secrets_file[0]: "" is not a file path`}},
		{"secrets_file on paypal", `{name: p, scheme: paypal, secrets_file: [/run/s], webhook_id: W, cert_file: c, ca_file: ca}`,
			[]string{"providers[0].secrets_file: does not apply to scheme paypal, which verifies with cert_file"}},
		{"scope_from malformed", `{name: p, scheme: stripe, secrets_env: [K], scope_from: account}`,
			[]string{`providers[0].scope_from: "account" must be header:NAME or json:dotted.path`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("providers:\n  - " + tc.yaml + "\n"))
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, problems(err))
		})
	}
}

// TestReplayGuardDefaultsOfNewSchemes: the guard is on by default only
// where the signature does not cover the id.
func TestReplayGuardDefaultsOfNewSchemes(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
providers:
  - {name: paddle, scheme: paddle, secrets_env: [A]}
  - {name: square, scheme: square, secrets_env: [A], notification_url: "https://x.example/sq"}
  - {name: easypost, scheme: easypost, secrets_env: [A]}
  - {name: adyen, scheme: adyen, secrets_env: [A]}
  - {name: paypal, scheme: paypal, webhook_id: W, cert_file: c.pem, ca_file: ca.pem}
  - {name: ed-json, scheme: ed25519, public_keys_env: [A], header: X-Sig, timestamp_header: X-Ts, id_from: "json:id"}
  - {name: ed-header, scheme: ed25519, public_keys_env: [A], header: X-Sig, timestamp_header: X-Ts, id_from: "header:X-Id"}
  - {name: ec-header, scheme: ecdsa, public_keys_env: [A], header: X-Sig, timestamp_header: X-Ts, id_from: "header:X-Id"}
  - {name: ec-header-off, scheme: ecdsa, public_keys_env: [A], header: X-Sig, timestamp_header: X-Ts, id_from: "header:X-Id", replay_guard: off}
`))
	require.NoError(t, err)
	got := map[string]string{}
	for _, p := range c.Providers {
		got[p.Name] = p.ReplayGuard
	}
	require.Equal(t, map[string]string{
		"paddle": "off", "square": "off", "easypost": "off", "adyen": "off", "paypal": "off",
		"ed-json": "off", "ed-header": "body", "ec-header": "body", "ec-header-off": "off",
	}, got)
}

func TestResolvePublicKeys(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
providers:
  - {name: discord, scheme: ed25519, public_keys_env: [DISCORD_KEY, DISCORD_OLD], header: X-Sig, timestamp_header: X-Ts, id_from: "json:id"}
  - {name: sendgrid, scheme: ecdsa, public_keys_env: [SENDGRID_KEY], header: X-Sig, timestamp_header: X-Ts, id_from: "json:sg_event_id"}
`))
	require.NoError(t, err)
	edKey := "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	ecKey := "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="

	s, err := c.ResolveSecrets(func(k string) string {
		return map[string]string{"DISCORD_KEY": edKey, "DISCORD_OLD": edKey, "SENDGRID_KEY": ecKey}[k]
	})
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte(edKey), []byte(edKey)}, s.Provider["discord"])
	require.Equal(t, [][]byte{[]byte(ecKey)}, s.Provider["sendgrid"])

	_, err = c.ResolveSecrets(func(k string) string { return map[string]string{"DISCORD_KEY": edKey}[k] })
	require.Equal(t, []string{
		"providers[0].public_keys_env[1]: environment variable DISCORD_OLD is not set or empty",
		"providers[1].public_keys_env[0]: environment variable SENDGRID_KEY is not set or empty",
	}, problems(err))
}
