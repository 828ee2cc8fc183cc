package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hookgate/hookgate/internal/config"
)

// Local demo secrets. They are published here on purpose: `devtool run` gives
// them to every secret variable the config names that the environment leaves
// unset, so a fresh clone runs with no setup, and `devtool send` signs with
// the same one. They protect nothing and must never reach a real deployment.
const (
	// demoWebhookSecret is a Standard Webhooks secret: "whsec_" followed by
	// the base64 of the 32 bytes "hookgate-local-demo-secret-32byt".
	demoWebhookSecret = "whsec_aG9va2dhdGUtbG9jYWwtZGVtby1zZWNyZXQtMzJieXQ="
	// demoStripeSecret has the shape of a Stripe endpoint secret; Stripe's
	// scheme uses the string as it is.
	demoStripeSecret = "whsec_hookgate_local_demo_secret"
	// demoPlainSecret serves the schemes that take any string (github,
	// shopify, hmac).
	demoPlainSecret = "hookgate-local-demo-secret"
	// demoAdyenKey is an Adyen HMAC key, which Adyen writes in hex: the
	// bytes of demoPlainSecret.
	demoAdyenKey = "686f6f6b676174652d6c6f63616c2d64656d6f2d736563726574"
)

// demoSecrets returns a demo value for each secret variable cfg names (a
// provider's secrets_env, a route's signing_secret_env) that getenv reports
// unset or empty. Variables that are set are left out, so their values are
// never replaced. The value suits the scheme that reads it.
func demoSecrets(cfg *config.Config, getenv func(string) string) map[string]string {
	out := map[string]string{}
	add := func(name, value string) {
		if _, done := out[name]; !done && getenv(name) == "" {
			out[name] = value
		}
	}
	for _, p := range cfg.Providers {
		value := demoPlainSecret
		switch p.Scheme {
		case config.SchemeStandardWebhooks:
			value = demoWebhookSecret
		case config.SchemeStripe:
			value = demoStripeSecret
		case config.SchemeAdyen:
			value = demoAdyenKey
		}
		for _, name := range p.SecretsEnv {
			add(name, value)
		}
	}
	for _, r := range cfg.Routes {
		if r.SigningSecretEnv != "" {
			add(r.SigningSecretEnv, demoWebhookSecret) // a Standard Webhooks secret
		}
	}
	return out
}

// demoSecretsNotice says which variables got demo values, by name only.
func demoSecretsNotice(defaulted map[string]string) string {
	if len(defaulted) == 0 {
		return "all secret variables the config names are set; using them"
	}
	return fmt.Sprintf("using local demo secrets (see cmd/devtool/secrets.go) for unset %s",
		strings.Join(slices.Sorted(maps.Keys(defaulted)), ", "))
}
