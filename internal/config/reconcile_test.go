package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReconcileSection checks providers[].reconcile: its defaults, what
// each scheme requires, and that every problem names its key.
func TestReconcileSection(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"stripe", `{name: p, scheme: stripe, secrets_env: [K], reconcile: {api_key_env: STRIPE_KEY}}`, nil},
		{"stripe from a file", `{name: p, scheme: stripe, secrets_env: [K], reconcile: {api_key_file: /run/stripe, every: 1s, lookback: 720h}}`, nil},
		{"github repo hook", `{name: p, scheme: github, secrets_env: [K], reconcile: {token_env: GH, hook: repos/acme/shop/hooks/123456}}`, nil},
		{"github org hook", `{name: p, scheme: github, secrets_env: [K], reconcile: {token_file: /run/gh, hook: orgs/acme/hooks/9}}`, nil},
		{"github app", `{name: p, scheme: github, secrets_env: [K], reconcile: {hook: app, app_id: 42, private_key_file: /run/app.pem}}`, nil},
		{"stripe bare", `{name: p, scheme: stripe, secrets_env: [K], reconcile: {token_env: GH, every: 500ms, lookback: 721h, api_base: "ftp://x"}}`, []string{
			"providers[0].reconcile.api_key_env: is required (or api_key_file)",
			"providers[0].reconcile.token_env: does not apply to scheme stripe",
			"providers[0].reconcile.every: must be at least 1s, got 500ms",
			"providers[0].reconcile.lookback: 721h0m0s is longer than 720h: the provider keeps events 30 days at most",
			"providers[0].reconcile.api_base: must be an absolute http or https URL without a query",
		}},
		{"stripe key twice", `{name: p, scheme: stripe, secrets_env: [K], reconcile: {api_key_env: A, api_key_file: /f}}`,
			[]string{"providers[0].reconcile.api_key_file: is set beside api_key_env: name the secret once"}},
		{"stripe with a header scope", `{name: p, scheme: stripe, secrets_env: [K], scope_from: "header:X-Account", reconcile: {api_key_env: A}}`,
			[]string{`providers[0].reconcile: cannot be used with scope_from "header:X-Account": a fetched event has no headers to read the scope from`}},
		{"github without a hook", `{name: p, scheme: github, secrets_env: [K], reconcile: {api_key_env: A}}`, []string{
			"providers[0].reconcile.api_key_env: does not apply to scheme github",
			"providers[0].reconcile.hook: is required for scheme github: repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app",
		}},
		{"github bad hook", `{name: p, scheme: github, secrets_env: [K], reconcile: {token_env: GH, hook: repos/acme/hooks/x}}`,
			[]string{`providers[0].reconcile.hook: "repos/acme/hooks/x" must be repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app`}},
		{"github hook without a token", `{name: p, scheme: github, secrets_env: [K], reconcile: {hook: orgs/acme/hooks/1, app_id: 3}}`, []string{
			"providers[0].reconcile.token_env: is required (or token_file)",
			"providers[0].reconcile.app_id: applies only with hook app",
		}},
		{"github app bare", `{name: p, scheme: github, secrets_env: [K], reconcile: {hook: app, token_env: GH}}`, []string{
			"providers[0].reconcile.app_id: is required with hook app (the GitHub App's id)",
			"providers[0].reconcile.private_key_file: is required with hook app (the GitHub App's private key, PEM)",
			"providers[0].reconcile.token_env: does not apply with hook app, which authenticates as the App",
		}},
		{"github with a scope", `{name: p, scheme: github, secrets_env: [K], scope_from: "json:installation.id", reconcile: {token_env: GH, hook: orgs/a/hooks/1}}`,
			[]string{"providers[0].reconcile: cannot be used with scope_from: a delivery id is claimed scoped, and GitHub lists it without the scope"}},
		{"another scheme", `{name: p, scheme: shopify, secrets_env: [K], reconcile: {token_env: GH}}`,
			[]string{"providers[0].reconcile: applies only to scheme stripe or github, not shopify"}},
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

// TestReconcileDefaults: every 5m, a 72h lookback, the provider's own API.
func TestReconcileDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`providers:
  - {name: s, scheme: stripe, secrets_env: [K], reconcile: {api_key_env: A}}
  - {name: g, scheme: github, secrets_env: [K], reconcile: {token_env: T, hook: repos/a/b/hooks/1}}
  - {name: n, scheme: stripe, secrets_env: [K]}
`))
	require.NoError(t, err)
	s, g := cfg.Providers[0].Reconcile, cfg.Providers[1].Reconcile
	require.Equal(t, 5*time.Minute, s.Every.D())
	require.Equal(t, 72*time.Hour, s.Lookback.D())
	require.Equal(t, StripeAPIBase, s.APIBase)
	require.Equal(t, GitHubAPIBase, g.APIBase)
	require.Nil(t, cfg.Providers[2].Reconcile)
}

// TestParseHook splits the hook paths GitHub's API takes.
func TestParseHook(t *testing.T) {
	t.Parallel()
	owner, repo, id, ok := ParseHook("repos/acme/shop.js/hooks/123456")
	require.True(t, ok)
	require.Equal(t, []any{"acme", "shop.js", int64(123456)}, []any{owner, repo, id})
	owner, repo, id, ok = ParseHook("orgs/acme/hooks/7")
	require.True(t, ok)
	require.Equal(t, []any{"acme", "", int64(7)}, []any{owner, repo, id})
	for _, bad := range []string{"app", "repos/a/hooks/1", "orgs/a/hooks/0", "repos/a/b/hooks/1/x", "orgs/a b/hooks/1"} {
		_, _, _, ok := ParseHook(bad)
		require.False(t, ok, bad)
	}
}
