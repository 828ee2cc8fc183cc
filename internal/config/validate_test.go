package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// setup returns a fresh copy of testdata/valid.yaml, decoded and defaulted, for
// a test to break one rule in. Its providers are stripe (providers[0]) and acme
// (providers[1], scheme hmac); its routes are ship-order (routes[0], provider
// stripe) and acme-all (routes[1], provider acme).
func setup(t *testing.T) *Config {
	t.Helper()
	c, err := Load("testdata/valid.yaml")
	require.NoError(t, err)
	return c
}

// problems splits a Validate error into its lines, one problem each.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

const (
	nameRule   = "must be lower-case letters, digits, - or _ (at most 63), starting with a letter or digit"
	schemeList = "stripe, github, shopify, standard-webhooks, hmac, paddle, square, easypost, adyen, paypal, ed25519, ecdsa"
	sourceRule = "must be header:NAME or json:dotted.path"
	absURLRule = "must be an absolute http or https URL"
	credRule   = "must not carry credentials; use signing_secret_env to authenticate forwarded events"
)

func TestValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		mutate func(c *Config)
		// want is every problem Validate reports, one per line, in order;
		// nil means the configuration is valid.
		want []string
	}{
		{
			name:   "ValidAsLoaded",
			mutate: func(c *Config) {},
		},

		// Provider names: required, URL-safe, unique.
		{
			name:   "ProviderNameWithDigitsDashUnderscore",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "acme_2-eu", "acme_2-eu" },
		},
		{
			name:   "ProviderNameStartingWithDigit",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "1password", "1password" },
		},
		{
			name: "ProviderName63Chars",
			mutate: func(c *Config) {
				c.Providers[1].Name = "a" + strings.Repeat("b", 62)
				c.Routes[1].Provider = c.Providers[1].Name
			},
		},
		{
			name:   "ProviderNameEmpty",
			mutate: func(c *Config) { c.Providers[1].Name = "" },
			want: []string{
				"providers[1].name: is required",
				`routes[1].provider: "acme" is not a configured provider`,
			},
		},
		{
			name:   "ProviderNameUpperCase",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "Acme", "Acme" },
			want:   []string{`providers[1].name: "Acme" ` + nameRule},
		},
		{
			name:   "ProviderNameWithSlash",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "acme/eu", "acme/eu" },
			want:   []string{`providers[1].name: "acme/eu" ` + nameRule},
		},
		{
			name:   "ProviderNameWithDot",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "acme.eu", "acme.eu" },
			want:   []string{`providers[1].name: "acme.eu" ` + nameRule},
		},
		{
			name:   "ProviderNameLeadingDash",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "-acme", "-acme" },
			want:   []string{`providers[1].name: "-acme" ` + nameRule},
		},
		{
			name: "ProviderName64Chars",
			mutate: func(c *Config) {
				c.Providers[1].Name = "a" + strings.Repeat("b", 63)
				c.Routes[1].Provider = c.Providers[1].Name
			},
			want: []string{`providers[1].name: "a` + strings.Repeat("b", 63) + `" ` + nameRule},
		},
		{
			name:   "ProviderNameDuplicate",
			mutate: func(c *Config) { c.Providers[1].Name, c.Routes[1].Provider = "stripe", "stripe" },
			want:   []string{`providers[1].name: "stripe" is used by another provider`},
		},
		{
			name:   "NoProviders",
			mutate: func(c *Config) { c.Providers = nil },
			want: []string{
				"providers: at least one provider is required",
				`routes[0].provider: "stripe" is not a configured provider`,
				`routes[1].provider: "acme" is not a configured provider`,
			},
		},

		// Route names: required, URL-safe, unique; provider must exist.
		{
			name:   "RouteNameWithDigitsDashUnderscore",
			mutate: func(c *Config) { c.Routes[1].Name = "acme_all-2" },
		},
		{
			name:   "RouteNameEmpty",
			mutate: func(c *Config) { c.Routes[1].Name = "" },
			want:   []string{"routes[1].name: is required"},
		},
		{
			name:   "RouteNameWithSpace",
			mutate: func(c *Config) { c.Routes[1].Name = "acme all" },
			want:   []string{`routes[1].name: "acme all" ` + nameRule},
		},
		{
			name:   "RouteNameDuplicate",
			mutate: func(c *Config) { c.Routes[1].Name = "ship-order" },
			want:   []string{`routes[1].name: "ship-order" is used by another route`},
		},
		{
			name:   "RouteProviderEmpty",
			mutate: func(c *Config) { c.Routes[1].Provider = "" },
			want:   []string{"routes[1].provider: is required"},
		},
		{
			name:   "RouteProviderUnknown",
			mutate: func(c *Config) { c.Routes[1].Provider = "strpe" },
			want:   []string{`routes[1].provider: "strpe" is not a configured provider`},
		},
		{
			name:   "NoRoutes",
			mutate: func(c *Config) { c.Routes = nil },
		},

		// Schemes.
		{
			name:   "SchemeGitHub",
			mutate: func(c *Config) { c.Providers[0].Scheme = SchemeGitHub },
		},
		{
			name:   "SchemeShopify",
			mutate: func(c *Config) { c.Providers[0].Scheme = SchemeShopify },
		},
		{
			name:   "SchemeStandardWebhooks",
			mutate: func(c *Config) { c.Providers[0].Scheme = SchemeStandardWebhooks },
		},
		{
			name:   "SchemeEmpty",
			mutate: func(c *Config) { c.Providers[0].Scheme = "" },
			want:   []string{"providers[0].scheme: is required (one of " + schemeList + ")"},
		},
		{
			name:   "SchemeUnknown",
			mutate: func(c *Config) { c.Providers[0].Scheme = "paypall" },
			want:   []string{`providers[0].scheme: "paypall" is not a known scheme (one of ` + schemeList + ")"},
		},
		{
			// Only the scheme is reported: whether the hmac keys belong
			// cannot be said until the scheme is known.
			name:   "SchemeWrongCase",
			mutate: func(c *Config) { c.Providers[1].Scheme = "HMAC" },
			want:   []string{`providers[1].scheme: "HMAC" is not a known scheme (one of ` + schemeList + ")"},
		},

		// The generic hmac scheme.
		{
			name: "HMACMinimal",
			mutate: func(c *Config) {
				p := &c.Providers[1]
				p.Prefix, p.TypeFrom, p.TimestampHeader = "", "", ""
			},
		},
		{
			name:   "HMACHeaderMissing",
			mutate: func(c *Config) { c.Providers[1].Header = "" },
			want:   []string{"providers[1].header: is required for scheme hmac"},
		},
		{
			name:   "HMACEncodingBase64",
			mutate: func(c *Config) { c.Providers[1].Encoding = "base64" },
		},
		{
			name:   "HMACEncodingMissing",
			mutate: func(c *Config) { c.Providers[1].Encoding = "" },
			want:   []string{`providers[1].encoding: "" must be hex or base64 for scheme hmac`},
		},
		{
			name:   "HMACEncodingUpperCase",
			mutate: func(c *Config) { c.Providers[1].Encoding = "HEX" },
			want:   []string{`providers[1].encoding: "HEX" must be hex or base64 for scheme hmac`},
		},
		{
			name:   "HMACEncodingBase64URL",
			mutate: func(c *Config) { c.Providers[1].Encoding = "base64url" },
			want:   []string{`providers[1].encoding: "base64url" must be hex or base64 for scheme hmac`},
		},
		{
			name:   "HMACIDFromJSON",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "json:data.object.id" },
		},
		{
			name:   "HMACIDFromMissing",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "" },
			want:   []string{"providers[1].id_from: is required for scheme hmac (header:NAME or json:dotted.path)"},
		},
		{
			name:   "HMACIDFromBareHeaderName",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "X-Acme-Delivery" },
			want:   []string{`providers[1].id_from: "X-Acme-Delivery" ` + sourceRule},
		},
		{
			name:   "HMACIDFromUnknownKind",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "body:id" },
			want:   []string{`providers[1].id_from: "body:id" ` + sourceRule},
		},
		{
			name:   "HMACIDFromEmptyName",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "header:" },
			want:   []string{`providers[1].id_from: "header:" ` + sourceRule},
		},
		{
			name:   "HMACIDFromSpace",
			mutate: func(c *Config) { c.Providers[1].IDFrom = "json:data id" },
			want:   []string{`providers[1].id_from: "json:data id" ` + sourceRule},
		},
		{
			name:   "HMACTypeFromHeader",
			mutate: func(c *Config) { c.Providers[1].TypeFrom = "header:X-Acme-Event" },
		},
		{
			name:   "HMACTypeFromUnknownKind",
			mutate: func(c *Config) { c.Providers[1].TypeFrom = "query:type" },
			want:   []string{`providers[1].type_from: "query:type" ` + sourceRule},
		},
		{
			name:   "HMACTypeFromEmptyPath",
			mutate: func(c *Config) { c.Providers[1].TypeFrom = "json:" },
			want:   []string{`providers[1].type_from: "json:" ` + sourceRule},
		},
		{
			name: "HMACEverythingMissing",
			mutate: func(c *Config) {
				c.Providers[1] = Provider{
					Name: "acme", Scheme: SchemeHMAC, SecretsEnv: []string{"ACME_WEBHOOK_SECRET"},
					Tolerance: Duration(5 * time.Minute), OnFailedRedelivery: RedeliveryReopen, ReplayGuard: ReplayGuardOff,
				}
			},
			want: []string{
				"providers[1].header: is required for scheme hmac",
				`providers[1].encoding: "" must be hex or base64 for scheme hmac`,
				"providers[1].id_from: is required for scheme hmac (header:NAME or json:dotted.path)",
			},
		},

		// secrets_env.
		{
			name:   "SecretsEnvLowerCaseAndUnderscore",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv = []string{"_stripe_secret_2"} },
		},
		{
			name:   "SecretsEnvMissing",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv = nil },
			want:   []string{"providers[0].secrets_env: at least one environment variable name is required"},
		},
		{
			name:   "SecretsEnvEmptyList",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv = []string{} },
			want:   []string{"providers[0].secrets_env: at least one environment variable name is required"},
		},
		{
			name:   "SecretsEnvDash",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv[1] = "STRIPE-SECRET" },
			want:   []string{`providers[0].secrets_env[1]: "STRIPE-SECRET" is not an environment variable name`},
		},
		{
			name:   "SecretsEnvLeadingDigit",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv[0] = "1SECRET" },
			want:   []string{`providers[0].secrets_env[0]: "1SECRET" is not an environment variable name`},
		},
		{
			name:   "SecretsEnvDollar",
			mutate: func(c *Config) { c.Providers[0].SecretsEnv[0] = "$STRIPE_WEBHOOK_SECRET" },
			want:   []string{`providers[0].secrets_env[0]: "$STRIPE_WEBHOOK_SECRET" is not an environment variable name`},
		},
		{
			name:   "SecretsEnvEmptyName",
			mutate: func(c *Config) { c.Providers[1].SecretsEnv = []string{""} },
			want:   []string{`providers[1].secrets_env[0]: "" is not an environment variable name`},
		},

		// tolerance and on_failed_redelivery.
		{
			name:   "ToleranceZero",
			mutate: func(c *Config) { c.Providers[0].Tolerance = 0 },
			want:   []string{"providers[0].tolerance: must be a positive duration, got 0s"},
		},
		{
			name:   "ToleranceNegative",
			mutate: func(c *Config) { c.Providers[0].Tolerance = Duration(-time.Minute) },
			want:   []string{"providers[0].tolerance: must be a positive duration, got -1m0s"},
		},
		{
			name:   "OnFailedRedeliveryAck",
			mutate: func(c *Config) { c.Providers[0].OnFailedRedelivery = RedeliveryAck },
		},
		{
			name:   "OnFailedRedeliveryReopen",
			mutate: func(c *Config) { c.Providers[0].OnFailedRedelivery = RedeliveryReopen },
		},
		{
			name:   "OnFailedRedeliveryEmpty",
			mutate: func(c *Config) { c.Providers[0].OnFailedRedelivery = "" },
			want:   []string{`providers[0].on_failed_redelivery: "" must be reopen or ack`},
		},
		{
			name:   "OnFailedRedeliveryUnknown",
			mutate: func(c *Config) { c.Providers[0].OnFailedRedelivery = "retry" },
			want:   []string{`providers[0].on_failed_redelivery: "retry" must be reopen or ack`},
		},
		{
			name:   "OnFailedRedeliveryWrongCase",
			mutate: func(c *Config) { c.Providers[0].OnFailedRedelivery = "Ack" },
			want:   []string{`providers[0].on_failed_redelivery: "Ack" must be reopen or ack`},
		},

		// replay_guard.
		{
			name:   "ReplayGuardBody",
			mutate: func(c *Config) { c.Providers[0].ReplayGuard = ReplayGuardBody },
		},
		{
			name:   "ReplayGuardOff",
			mutate: func(c *Config) { c.Providers[1].ReplayGuard = ReplayGuardOff },
		},
		{
			name:   "ReplayGuardUnknown",
			mutate: func(c *Config) { c.Providers[0].ReplayGuard = "header" },
			want:   []string{`providers[0].replay_guard: "header" must be off or body`},
		},
		{
			name:   "MaxInFlightZero",
			mutate: func(c *Config) { c.Ingest.MaxInFlight = -1 },
			want:   []string{"ingest.max_in_flight: must be at least 1, got -1"},
		},

		// Route URLs: absolute http or https, with a host, without credentials.
		{
			name:   "URLHTTPSWithPort",
			mutate: func(c *Config) { c.Routes[0].URL = "https://shipments.internal:8443/hooks?source=hookgate" },
		},
		{
			name:   "URLLoopback",
			mutate: func(c *Config) { c.Routes[0].URL = "http://127.0.0.1:9099/hooks/demo" },
		},
		{
			name:   "URLIPv6",
			mutate: func(c *Config) { c.Routes[0].URL = "http://[::1]:9099/hooks" },
		},
		{
			name:   "URLUpperCaseScheme",
			mutate: func(c *Config) { c.Routes[0].URL = "HTTPS://shipments.internal/hooks" },
		},
		{
			name:   "URLMissing",
			mutate: func(c *Config) { c.Routes[0].URL = "" },
			want:   []string{"routes[0].url: is required"},
		},
		{
			name:   "URLRelativePath",
			mutate: func(c *Config) { c.Routes[0].URL = "/hooks/stripe" },
			want:   []string{`routes[0].url: "/hooks/stripe" ` + absURLRule},
		},
		{
			name:   "URLWithoutScheme",
			mutate: func(c *Config) { c.Routes[0].URL = "shipments.internal/hooks/stripe" },
			want:   []string{`routes[0].url: "shipments.internal/hooks/stripe" ` + absURLRule},
		},
		{
			name:   "URLSchemeRelative",
			mutate: func(c *Config) { c.Routes[0].URL = "//shipments.internal/hooks/stripe" },
			want:   []string{`routes[0].url: "//shipments.internal/hooks/stripe" ` + absURLRule},
		},
		{
			name:   "URLFTP",
			mutate: func(c *Config) { c.Routes[0].URL = "ftp://shipments.internal/hooks" },
			want:   []string{`routes[0].url: "ftp://shipments.internal/hooks" ` + absURLRule},
		},
		{
			name:   "URLMissingHost",
			mutate: func(c *Config) { c.Routes[0].URL = "http:///hooks/stripe" },
			want:   []string{`routes[0].url: "http:///hooks/stripe" ` + absURLRule},
		},
		{
			name:   "URLPortWithoutHost",
			mutate: func(c *Config) { c.Routes[0].URL = "http://:9099/hooks/stripe" },
			want:   []string{`routes[0].url: "http://:9099/hooks/stripe" ` + absURLRule},
		},
		{
			name:   "URLOpaque",
			mutate: func(c *Config) { c.Routes[0].URL = "http:shipments.internal" },
			want:   []string{`routes[0].url: "http:shipments.internal" ` + absURLRule},
		},
		{
			name:   "URLUnparseable",
			mutate: func(c *Config) { c.Routes[0].URL = "http://shipments internal/hooks" },
			want:   []string{`routes[0].url: is not a valid URL`},
		},
		{
			// The message must not repeat the URL: it holds a password.
			name:   "URLUserAndPassword",
			mutate: func(c *Config) { c.Routes[0].URL = "https://ship:hunter2@shipments.internal/hooks" },
			want:   []string{"routes[0].url: " + credRule},
		},
		{
			name:   "URLUserOnly",
			mutate: func(c *Config) { c.Routes[1].URL = "https://token123@acme.internal/hooks" },
			want:   []string{"routes[1].url: " + credRule},
		},

		// Event patterns.
		{
			name:   "EventsGlobs",
			mutate: func(c *Config) { c.Routes[0].Events = []string{"orders/*", "invoice.[pf]aid", "charge.?efunded", "*"} },
		},
		{
			name:   "EventsMissing",
			mutate: func(c *Config) { c.Routes[0].Events = nil },
			want:   []string{"routes[0].events: at least one event type or pattern is required"},
		},
		{
			name:   "EventsUnclosedBracket",
			mutate: func(c *Config) { c.Routes[0].Events[1] = "invoice.[" },
			want:   []string{`routes[0].events[1]: "invoice.[" is not a valid glob`},
		},
		{
			name:   "EventsUnclosedBracketMidPattern",
			mutate: func(c *Config) { c.Routes[0].Events[1] = "invoice.[pf*" },
			want:   []string{`routes[0].events[1]: "invoice.[pf*" is not a valid glob`},
		},
		{
			name:   "EventsTrailingEscape",
			mutate: func(c *Config) { c.Routes[0].Events[0] = `invoice\` },
			want:   []string{`routes[0].events[0]: "invoice\\" is not a valid glob`},
		},
		{
			name:   "EventsEmptyPattern",
			mutate: func(c *Config) { c.Routes[0].Events[0] = "" },
			want:   []string{`routes[0].events[0]: "" is empty`},
		},
		{
			name:   "EventsSpace",
			mutate: func(c *Config) { c.Routes[0].Events[0] = "invoice paid" },
			want:   []string{`routes[0].events[0]: "invoice paid" must be printable ASCII without spaces`},
		},
		{
			name:   "EventsTrailingNewline",
			mutate: func(c *Config) { c.Routes[0].Events[0] = "invoice.paid\n" },
			want:   []string{`routes[0].events[0]: "invoice.paid\n" must be printable ASCII without spaces`},
		},
		{
			name:   "EventsNonASCII",
			mutate: func(c *Config) { c.Routes[0].Events[0] = "facture.payée" },
			want:   []string{`routes[0].events[0]: "facture.payée" must be printable ASCII without spaces`},
		},

		// Route timeout, attempts and backoff.
		{
			name:   "TimeoutZero",
			mutate: func(c *Config) { c.Routes[0].Timeout = 0 },
			want:   []string{"routes[0].timeout: must be a positive duration, got 0s"},
		},
		{
			name:   "TimeoutNegative",
			mutate: func(c *Config) { c.Routes[0].Timeout = Duration(-5 * time.Second) },
			want:   []string{"routes[0].timeout: must be a positive duration, got -5s"},
		},
		{
			name:   "TimeoutJustUnderRescueAfterLessTheEndBound",
			mutate: func(c *Config) { c.Routes[0].Timeout = Duration(10*time.Minute - 25*time.Second - time.Millisecond) },
		},
		{
			// A run may outlast its call by the end bound: a timeout that
			// leaves it no room would let River rescue a live run.
			name:   "TimeoutJustUnderRescueAfter",
			mutate: func(c *Config) { c.Routes[0].Timeout = Duration(10*time.Minute - time.Second) },
			want: []string{
				"routes[0].timeout: 9m59s must be shorter than worker.rescue_after (10m0s) less the 25s a run may take past its call, or a live run would be rescued while it runs",
			},
		},
		{
			// A short rescue_after (a test's) has a short end bound.
			name: "ShortRescueAfterHasAShortEndBound",
			mutate: func(c *Config) {
				c.Worker.RescueAfter = Duration(4 * time.Second)
				c.Routes[0].Timeout, c.Routes[1].Timeout = Duration(2*time.Second), Duration(3*time.Second)
			},
			want: []string{
				"routes[1].timeout: 3s must be shorter than worker.rescue_after (4s) less the 1s a run may take past its call, or a live run would be rescued while it runs",
			},
		},
		{
			name:   "TimeoutEqualsRescueAfter",
			mutate: func(c *Config) { c.Routes[0].Timeout = Duration(10 * time.Minute) },
			want: []string{
				"routes[0].timeout: 10m0s must be shorter than worker.rescue_after (10m0s) less the 25s a run may take past its call, or a live run would be rescued while it runs",
			},
		},
		{
			name:   "TimeoutLongerThanRescueAfter",
			mutate: func(c *Config) { c.Routes[1].Timeout = Duration(time.Hour) },
			want: []string{
				"routes[1].timeout: 1h0m0s must be shorter than worker.rescue_after (10m0s) less the 25s a run may take past its call, or a live run would be rescued while it runs",
			},
		},
		{
			name:   "RescueAfterShortenedBelowDefaultTimeout",
			mutate: func(c *Config) { c.Worker.RescueAfter = Duration(10 * time.Second) },
			want: []string{
				"routes[0].timeout: 10s must be shorter than worker.rescue_after (10s) less the 2.5s a run may take past its call, or a live run would be rescued while it runs",
				"routes[1].timeout: 10s must be shorter than worker.rescue_after (10s) less the 2.5s a run may take past its call, or a live run would be rescued while it runs",
			},
		},
		{
			name:   "MaxAttemptsOne",
			mutate: func(c *Config) { c.Routes[0].MaxAttempts = 1 },
		},
		{
			name:   "MaxAttemptsZero",
			mutate: func(c *Config) { c.Routes[0].MaxAttempts = 0 },
			want:   []string{"routes[0].max_attempts: must be at least 1, got 0"},
		},
		{
			name:   "MaxAttemptsNegative",
			mutate: func(c *Config) { c.Routes[1].MaxAttempts = -3 },
			want:   []string{"routes[1].max_attempts: must be at least 1, got -3"},
		},
		{
			name: "BackoffInitialEqualsMax",
			mutate: func(c *Config) {
				c.Routes[0].Backoff = Backoff{Initial: Duration(time.Minute), Max: Duration(time.Minute)}
			},
		},
		{
			name: "BackoffInitialLongerThanMax",
			mutate: func(c *Config) {
				c.Routes[0].Backoff = Backoff{Initial: Duration(2 * time.Minute), Max: Duration(time.Minute)}
			},
			want: []string{"routes[0].backoff.initial: 2m0s is longer than backoff.max (1m0s)"},
		},
		{
			name:   "BackoffInitialZero",
			mutate: func(c *Config) { c.Routes[0].Backoff.Initial = 0 },
			want:   []string{"routes[0].backoff.initial: must be a positive duration, got 0s"},
		},
		{
			name:   "BackoffMaxZero",
			mutate: func(c *Config) { c.Routes[0].Backoff.Max = 0 },
			want: []string{
				"routes[0].backoff.max: must be a positive duration, got 0s",
				"routes[0].backoff.initial: 1s is longer than backoff.max (0s)",
			},
		},
		{
			name:   "RetryStatuses4xx",
			mutate: func(c *Config) { c.Routes[0].RetryStatuses = []int{400, 404, 423, 429, 499} },
		},
		{
			name:   "RetryStatusesOutside4xx",
			mutate: func(c *Config) { c.Routes[1].RetryStatuses = []int{404, 399, 500, 200, 0} },
			want: []string{
				"routes[1].retry_statuses[1]: 399 is not a 4xx status: retry_statuses lists codes from 400 to 499",
				"routes[1].retry_statuses[2]: 500 is not a 4xx status: retry_statuses lists codes from 400 to 499",
				"routes[1].retry_statuses[3]: 200 is not a 4xx status: retry_statuses lists codes from 400 to 499",
				"routes[1].retry_statuses[4]: 0 is not a 4xx status: retry_statuses lists codes from 400 to 499",
			},
		},
		{
			name:   "RetryStatusesTwice",
			mutate: func(c *Config) { c.Routes[0].RetryStatuses = []int{404, 423, 404} },
			want:   []string{"routes[0].retry_statuses[2]: 404 is listed twice"},
		},
		{
			name:   "SigningSecretEnvUnset",
			mutate: func(c *Config) { c.Routes[0].SigningSecretEnv = "" },
		},
		{
			name:   "SigningSecretEnvInvalid",
			mutate: func(c *Config) { c.Routes[0].SigningSecretEnv = "ship-order-secret" },
			want:   []string{`routes[0].signing_secret_env: "ship-order-secret" is not an environment variable name`},
		},
		{
			name: "SigningSecretFile",
			mutate: func(c *Config) {
				c.Routes[0].SigningSecretEnv, c.Routes[0].SigningSecretFile = "", "/run/secrets/ship-order"
			},
		},
		{
			name:   "SigningSecretFileBesideEnv",
			mutate: func(c *Config) { c.Routes[0].SigningSecretFile = "/run/secrets/ship-order" },
			want:   []string{"routes[0].signing_secret_file: is set beside signing_secret_env: name the secret once"},
		},

		// ingest, worker and retention.
		{
			name:   "MaxBodyBytesOne",
			mutate: func(c *Config) { c.Ingest.MaxBodyBytes = 1 },
		},
		{
			name:   "MaxBodyBytesZero",
			mutate: func(c *Config) { c.Ingest.MaxBodyBytes = 0 },
			want:   []string{"ingest.max_body_bytes: must be at least 1, got 0"},
		},
		{
			name:   "MaxBodyBytesNegative",
			mutate: func(c *Config) { c.Ingest.MaxBodyBytes = -1 },
			want:   []string{"ingest.max_body_bytes: must be at least 1, got -1"},
		},
		{
			name:   "ClaimTimeoutZero",
			mutate: func(c *Config) { c.Ingest.ClaimTimeout = 0 },
			want:   []string{"ingest.claim_timeout: must be a positive duration, got 0s"},
		},
		{
			name:   "ConcurrencyOne",
			mutate: func(c *Config) { c.Worker.Concurrency = 1 },
		},
		{
			name:   "ConcurrencyZero",
			mutate: func(c *Config) { c.Worker.Concurrency = 0 },
			want:   []string{"worker.concurrency: must be at least 1, got 0"},
		},
		{
			name:   "ConcurrencyNegative",
			mutate: func(c *Config) { c.Worker.Concurrency = -4 },
			want:   []string{"worker.concurrency: must be at least 1, got -4"},
		},
		{
			name: "ConcurrencyAboveRiversLimit",
			mutate: func(c *Config) {
				c.Worker.Concurrency, c.Routes[0].Concurrency, c.Routes[1].Concurrency = 10_001, 10_001, 10_001
			},
			want: []string{"worker.concurrency: must be at most 10000, got 10001"},
		},
		{
			name:   "RouteConcurrencyOne",
			mutate: func(c *Config) { c.Routes[0].Concurrency = 1 },
		},
		{
			name:   "RouteConcurrencyAtRiversLimit",
			mutate: func(c *Config) { c.Routes[1].Concurrency = 10_000 },
		},
		{
			name:   "RouteConcurrencyNegative",
			mutate: func(c *Config) { c.Routes[0].Concurrency = -2 },
			want:   []string{"routes[0].concurrency: must be between 1 and 10000, got -2"},
		},
		{
			name:   "RouteConcurrencyAboveRiversLimit",
			mutate: func(c *Config) { c.Routes[1].Concurrency = 10_001 },
			want:   []string{"routes[1].concurrency: must be between 1 and 10000, got 10001"},
		},
		{
			// The timeout comparison is skipped: rescue_after is what is wrong.
			name:   "RescueAfterZero",
			mutate: func(c *Config) { c.Worker.RescueAfter = 0 },
			want:   []string{"worker.rescue_after: must be a positive duration, got 0s"},
		},
		{
			name:   "ShutdownTimeoutNegative",
			mutate: func(c *Config) { c.Worker.ShutdownTimeout = Duration(-time.Second) },
			want:   []string{"worker.shutdown_timeout: must be a positive duration, got -1s"},
		},
		{
			name:   "ReconcileIntervalZero",
			mutate: func(c *Config) { c.Worker.ReconcileInterval = 0 },
			want:   []string{"worker.reconcile_interval: must be a positive duration, got 0s"},
		},
		{
			name:   "RetentionClaimsZero",
			mutate: func(c *Config) { c.Retention.Claims = 0 },
			want:   []string{"retention.claims: must be a positive duration, got 0s"},
		},
		{
			name:   "RetentionPayloadsNegative",
			mutate: func(c *Config) { c.Retention.Payloads = Duration(-time.Hour) },
			want:   []string{"retention.payloads: must be a positive duration, got -1h0m0s"},
		},
		{
			name: "RetentionInSeconds",
			mutate: func(c *Config) {
				c.Retention = Retention{Claims: Duration(2 * time.Second), Payloads: Duration(time.Second), Interval: Duration(time.Second), BatchSize: 1}
			},
		},
		{
			name:   "RetentionPayloadsEqualClaims",
			mutate: func(c *Config) { c.Retention.Payloads = c.Retention.Claims },
		},
		{
			name:   "RetentionPayloadsLongerThanClaims",
			mutate: func(c *Config) { c.Retention.Payloads = c.Retention.Claims + Duration(time.Second) },
			want:   []string{"retention.payloads: 2160h0m1s is longer than retention.claims (2160h0m0s): a payload cannot outlive its claim"},
		},
		{
			name:   "RetentionIntervalZero",
			mutate: func(c *Config) { c.Retention.Interval = 0 },
			want:   []string{"retention.interval: must be a positive duration, got 0s"},
		},
		{
			name:   "RetentionBatchSizeZero",
			mutate: func(c *Config) { c.Retention.BatchSize = 0 },
			want:   []string{"retention.batch_size: must be between 1 and 100000, got 0"},
		},
		{
			name:   "RetentionBatchSizeHuge",
			mutate: func(c *Config) { c.Retention.BatchSize = 100001 },
			want:   []string{"retention.batch_size: must be between 1 and 100000, got 100001"},
		},

		// Request shaping: method, headers, idempotency header, jq programs, TLS.
		{
			name: "ShapedRouteAsInTheContract",
			mutate: func(c *Config) {
				r := &c.Routes[1]
				r.Filter = `.data.object.metadata.ship == "true"`
				r.Method = "PUT"
				r.Headers = map[string]string{"Accept": "application/json"}
				r.SecretHeaders = map[string]string{"Authorization": "SHIPPER_AUTHORIZATION"}
				r.IdempotencyHeader = "X-Idempotency-Key"
				r.Body = `{order: .data.object.metadata.order_id, key: $event.idempotency_key}`
				r.Result = ".id"
				r.TLS = TLS{CAFile: "ca.pem", CertFile: "client.pem", KeyFile: "client-key.pem"}
			},
		},
		{
			name:   "UnknownMethod",
			mutate: func(c *Config) { c.Routes[0].Method = "GET" },
			want:   []string{`routes[0].method: "GET" is not a supported method (one of POST, PUT, PATCH)`},
		},
		{
			name: "HeadersThatHookgateSets",
			mutate: func(c *Config) {
				c.Routes[0].Headers = map[string]string{"content-type": "text/plain", "Hookgate-Route": "x", "Bad Name": "x"}
				c.Routes[0].SecretHeaders = map[string]string{"Idempotency-Key": "KEY"}
			},
			want: []string{
				`routes[0].headers.Bad Name: "Bad Name" is not a valid header name`,
				"routes[0].headers.Hookgate-Route: is a header hookgate or HTTP sets itself",
				"routes[0].headers.content-type: is a header hookgate or HTTP sets itself",
				"routes[0].secret_headers.Idempotency-Key: is a header hookgate or HTTP sets itself",
			},
		},
		{
			name: "HeaderValueWithANewline",
			mutate: func(c *Config) {
				c.Routes[0].Headers = map[string]string{"Accept": "application/json\r\nX-Injected: 1"}
			},
			want: []string{"routes[0].headers.Accept: the value holds a control character"},
		},
		{
			name: "SecretHeaderAlsoStatic",
			mutate: func(c *Config) {
				c.Routes[0].Headers = map[string]string{"authorization": "Bearer x"}
				c.Routes[0].SecretHeaders = map[string]string{"Authorization": "not an env name"}
			},
			want: []string{
				"routes[0].secret_headers.Authorization: is also in headers",
				`routes[0].secret_headers.Authorization: "not an env name" is not an environment variable name`,
			},
		},
		{
			name: "IdempotencyHeaderCollidesWithAHeader",
			mutate: func(c *Config) {
				c.Routes[0].IdempotencyHeader = "X-Idempotency-Key"
				c.Routes[0].Headers = map[string]string{"X-Idempotency-Key": "fixed"}
			},
			want: []string{"routes[0].headers.X-Idempotency-Key: is a header hookgate or HTTP sets itself"},
		},
		{
			name:   "IdempotencyHeaderReserved",
			mutate: func(c *Config) { c.Routes[0].IdempotencyHeader = "Hookgate-Route" },
			want:   []string{`routes[0].idempotency_header: "Hookgate-Route" is a header hookgate or HTTP sets itself`},
		},
		{
			name:   "TLSOnAnHTTPURL",
			mutate: func(c *Config) { c.Routes[0].TLS.CAFile = "ca.pem" },
			want:   []string{"routes[0].tls: applies only to https URLs"},
		},
		{
			name:   "TLSCertWithoutKey",
			mutate: func(c *Config) { c.Routes[1].TLS.CertFile = "client.pem" },
			want:   []string{"routes[1].tls: cert_file and key_file go together: give both or neither"},
		},
	}

	// Each hmac-only key is rejected on every other scheme.
	hmacOnly := []struct {
		key string
		set func(p *Provider)
	}{
		{"header", func(p *Provider) { p.Header = "Stripe-Signature" }},
		{"prefix", func(p *Provider) { p.Prefix = "v1=" }},
		{"encoding", func(p *Provider) { p.Encoding = "hex" }},
		{"id_from", func(p *Provider) { p.IDFrom = "json:id" }},
		{"type_from", func(p *Provider) { p.TypeFrom = "json:type" }},
		{"timestamp_header", func(p *Provider) { p.TimestampHeader = "X-Timestamp" }},
	}
	for _, scheme := range []string{SchemeStripe, SchemeGitHub, SchemeShopify, SchemeStandardWebhooks} {
		for _, k := range hmacOnly {
			tests = append(tests, struct {
				name   string
				mutate func(c *Config)
				want   []string
			}{
				name: "HMACOnlyKey_" + k.key + "_On_" + scheme,
				mutate: func(c *Config) {
					c.Providers[0].Scheme = scheme
					k.set(&c.Providers[0])
				},
				want: []string{"providers[0]." + k.key + ": applies only to scheme " + map[string]string{"prefix": "hmac"}[k.key] + map[bool]string{true: "hmac, ed25519, ecdsa"}[k.key != "prefix"] + ", not " + scheme},
			})
		}
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			c := setup(t)
			tt.mutate(c)
			err := c.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.want, problems(err))
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()

	c := setup(t)
	c.Worker.Concurrency = 0
	c.Providers[0].Scheme = "strype"
	c.Providers[1].Encoding = "b64"
	c.Routes[0].URL = "ftp://shipments.internal"
	c.Routes[1].Provider = "acmee"
	c.Routes[1].MaxAttempts = 0

	require.Equal(t, []string{
		"worker.concurrency: must be at least 1, got 0",
		`providers[0].scheme: "strype" is not a known scheme (one of ` + schemeList + ")",
		`providers[1].encoding: "b64" must be hex or base64 for scheme hmac`,
		`routes[0].url: "ftp://shipments.internal" ` + absURLRule,
		`routes[1].provider: "acmee" is not a configured provider`,
		"routes[1].max_attempts: must be at least 1, got 0",
	}, problems(c.Validate()))
}

func TestRouteMatches(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		events    []string
		eventType string
		want      bool
	}{
		{"ExactMatch", []string{"checkout.session.completed"}, "checkout.session.completed", true},
		{"ExactOtherType", []string{"checkout.session.completed"}, "checkout.session.expired", false},
		{"ExactIsNotPrefix", []string{"checkout.session"}, "checkout.session.completed", false},
		{"ExactIsCaseSensitive", []string{"invoice.paid"}, "Invoice.Paid", false},

		{"GlobSuffix", []string{"invoice.*"}, "invoice.paid", true},
		{"GlobSuffixLonger", []string{"invoice.*"}, "invoice.payment_failed", true},
		{"GlobSuffixDeeper", []string{"invoice.*"}, "invoice.payment.failed", true},
		{"GlobNeedsTheDot", []string{"invoice.*"}, "invoice", false},
		{"GlobIsAnchoredAtStart", []string{"invoice.*"}, "customer.invoice.paid", false},
		{"GlobOtherPrefix", []string{"invoice.*"}, "invoices.paid", false},
		{"GlobStarDoesNotCrossSlash", []string{"invoice.*"}, "invoice.a/b", false},
		{"GlobQuestionMark", []string{"charge.?efunded"}, "charge.refunded", true},
		{"GlobClass", []string{"invoice.[pf]aid"}, "invoice.paid", true},
		{"GlobClassNoMatch", []string{"invoice.[pf]aid"}, "invoice.raid", false},

		{"CatchAll", []string{"*"}, "invoice.paid", true},
		{"CatchAllWithSlash", []string{"*"}, "orders/create", true},
		{"CatchAllWithSlashes", []string{"*"}, "a/b/c", true},
		// An hmac provider without type_from has no event types.
		{"CatchAllEmptyType", []string{"*"}, "", true},
		{"GlobEmptyType", []string{"invoice.*"}, "", false},

		{"ShopifyTopic", []string{"orders/*"}, "orders/create", true},
		{"ShopifyTopicOther", []string{"orders/*"}, "orders/paid", true},
		{"ShopifyTopicTooDeep", []string{"orders/*"}, "orders/create/extra", false},
		{"ShopifyTopicOtherResource", []string{"orders/*"}, "products/create", false},
		{"ShopifyTopicNoSlash", []string{"orders/*"}, "orders", false},

		{"AnyOfSeveralFirst", []string{"checkout.session.completed", "invoice.*"}, "checkout.session.completed", true},
		{"AnyOfSeveralSecond", []string{"checkout.session.completed", "invoice.*"}, "invoice.paid", true},
		{"NoneOfSeveral", []string{"checkout.session.completed", "invoice.*"}, "charge.refunded", false},
		{"NoPatterns", nil, "invoice.paid", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			r := Route{Name: "r", Provider: "p", Events: tt.events}
			require.Equal(t, tt.want, r.Matches(tt.eventType))
		})
	}
}
