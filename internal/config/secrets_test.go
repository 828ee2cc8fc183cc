package config

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
)

// validEnv sets every variable testdata/valid.yaml names.
var validEnv = map[string]string{
	"STRIPE_WEBHOOK_SECRET":          "whsec_current",
	"STRIPE_WEBHOOK_SECRET_PREVIOUS": "whsec_previous",
	"ACME_WEBHOOK_SECRET":            "acme-secret",
	"SHIP_ORDER_SIGNING_SECRET":      "whsec_c2lnbmluZw==",
}

func TestResolveSecrets(t *testing.T) {
	t.Parallel()

	t.Run("AllSet", func(t *testing.T) {
		t.Parallel()

		c := setup(t)
		s, err := c.ResolveSecrets(mapEnv(validEnv))
		require.NoError(t, err)
		require.Equal(t, Secrets{
			Provider: map[string][][]byte{
				// In the order of secrets_env.
				"stripe": {[]byte("whsec_current"), []byte("whsec_previous")},
				"acme":   {[]byte("acme-secret")},
			},
			Route:   map[string][]byte{"ship-order": []byte("whsec_c2lnbmluZw==")},
			Headers: map[string]map[string]string{},
		}, s)
	})

	t.Run("ReadsOnlyNamedVariables", func(t *testing.T) {
		t.Parallel()

		c := setup(t)
		var asked []string
		_, err := c.ResolveSecrets(func(k string) string {
			asked = append(asked, k)
			return validEnv[k]
		})
		require.NoError(t, err)
		require.Equal(t, []string{
			"STRIPE_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET_PREVIOUS", "ACME_WEBHOOK_SECRET", "SHIP_ORDER_SIGNING_SECRET",
		}, asked)
	})

	tests := []struct {
		name  string
		unset []string // variables removed from validEnv
		empty []string // variables set to ""
		want  []string
	}{
		{
			name:  "ProviderSecretUnset",
			unset: []string{"STRIPE_WEBHOOK_SECRET_PREVIOUS"},
			want:  []string{"providers[0].secrets_env[1]: environment variable STRIPE_WEBHOOK_SECRET_PREVIOUS is not set or empty"},
		},
		{
			name:  "ProviderSecretEmpty",
			empty: []string{"ACME_WEBHOOK_SECRET"},
			want:  []string{"providers[1].secrets_env[0]: environment variable ACME_WEBHOOK_SECRET is not set or empty"},
		},
		{
			name:  "RouteSigningSecretUnset",
			unset: []string{"SHIP_ORDER_SIGNING_SECRET"},
			want:  []string{"routes[0].signing_secret_env: environment variable SHIP_ORDER_SIGNING_SECRET is not set or empty"},
		},
		{
			name:  "RouteSigningSecretEmpty",
			empty: []string{"SHIP_ORDER_SIGNING_SECRET"},
			want:  []string{"routes[0].signing_secret_env: environment variable SHIP_ORDER_SIGNING_SECRET is not set or empty"},
		},
		{
			name:  "EveryMissingVariable",
			unset: []string{"STRIPE_WEBHOOK_SECRET", "ACME_WEBHOOK_SECRET"},
			empty: []string{"SHIP_ORDER_SIGNING_SECRET"},
			want: []string{
				"providers[0].secrets_env[0]: environment variable STRIPE_WEBHOOK_SECRET is not set or empty",
				"providers[1].secrets_env[0]: environment variable ACME_WEBHOOK_SECRET is not set or empty",
				"routes[0].signing_secret_env: environment variable SHIP_ORDER_SIGNING_SECRET is not set or empty",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			env := maps.Clone(validEnv)
			for _, k := range tt.unset {
				delete(env, k)
			}
			for _, k := range tt.empty {
				env[k] = ""
			}
			_, err := setup(t).ResolveSecrets(mapEnv(env))
			require.Error(t, err)
			require.Equal(t, tt.want, problems(err))
		})
	}
}

// A secret's value must never reach an error, which ends up in logs.
func TestResolveSecretsNeverPrintsValues(t *testing.T) {
	t.Parallel()

	const secret = "whsec_TOPSECRET"
	c := setup(t)
	env := map[string]string{
		"STRIPE_WEBHOOK_SECRET":     secret,
		"ACME_WEBHOOK_SECRET":       secret,
		"SHIP_ORDER_SIGNING_SECRET": secret,
		// STRIPE_WEBHOOK_SECRET_PREVIOUS is missing.
	}
	_, err := c.ResolveSecrets(mapEnv(env))
	require.Error(t, err)
	require.Contains(t, err.Error(), "STRIPE_WEBHOOK_SECRET_PREVIOUS")
	for _, format := range []string{"%v", "%+v", "%#v", "%q"} {
		require.NotContains(t, fmt.Sprintf(format, err), "TOPSECRET", format)
	}

	// Nor through a wrapping caller.
	require.NotContains(t, fmt.Errorf("resolving secrets: %w", err).Error(), "TOPSECRET")
}

func TestResolveSecretHeaders(t *testing.T) {
	t.Parallel()

	withHeaders := func(t *testing.T) *Config {
		c := setup(t)
		c.Routes[1].SecretHeaders = map[string]string{"Authorization": "ACME_AUTHORIZATION", "X-Api-Key": "ACME_API_KEY"}
		return c
	}

	t.Run("AllSet", func(t *testing.T) {
		t.Parallel()
		env := maps.Clone(validEnv)
		env["ACME_AUTHORIZATION"], env["ACME_API_KEY"] = "Bearer tok_123", "key_456"
		s, err := withHeaders(t).ResolveSecrets(mapEnv(env))
		require.NoError(t, err)
		require.Equal(t, map[string]map[string]string{
			"acme-all": {"Authorization": "Bearer tok_123", "X-Api-Key": "key_456"},
		}, s.Headers)
	})

	t.Run("MissingVariableNamesTheKeyAndTheVariable", func(t *testing.T) {
		t.Parallel()
		env := maps.Clone(validEnv)
		env["ACME_API_KEY"] = "key_456"
		_, err := withHeaders(t).ResolveSecrets(mapEnv(env))
		require.Equal(t, []string{
			"routes[1].secret_headers.Authorization: environment variable ACME_AUTHORIZATION is not set or empty",
		}, problems(err))
	})

	t.Run("ValueWithANewlineIsRefusedWithoutShowingIt", func(t *testing.T) {
		t.Parallel()
		env := maps.Clone(validEnv)
		env["ACME_AUTHORIZATION"], env["ACME_API_KEY"] = "Bearer TOPSECRET\n", "key_456"
		_, err := withHeaders(t).ResolveSecrets(mapEnv(env))
		require.Equal(t, []string{
			"routes[1].secret_headers.Authorization: environment variable ACME_AUTHORIZATION holds a control character (a trailing newline?), which a header value cannot",
		}, problems(err))
		require.NotContains(t, err.Error(), "TOPSECRET")
	})
}

func TestSecretsValues(t *testing.T) {
	t.Parallel()
	s := Secrets{
		Provider: map[string][][]byte{"stripe": {[]byte("whsec_current"), []byte("whsec_previous")}},
		Route:    map[string][]byte{"ship-order": []byte("whsec_c2lnbmluZw==")},
		Headers:  map[string]map[string]string{"ship-order": {"Authorization": "Bearer sk_live_1", "X-Api-Key": "k-123"}},
	}
	require.Equal(t, []string{
		"whsec_current", "whsec_previous",
		"whsec_c2lnbmluZw==", "c2lnbmluZw==",
		"Bearer sk_live_1", "k-123",
	}, s.Values())
}
