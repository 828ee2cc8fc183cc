package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// examplePath is the documented example at the repository root.
const examplePath = "../../hookgate.example.yaml"

// exampleEnv sets every secret hookgate.example.yaml names.
var exampleEnv = map[string]string{
	"DEMO_WEBHOOK_SECRET":            "whsec_ZGVtby1zZWNyZXQtZm9yLWxvY2FsLWRldg==",
	"STRIPE_WEBHOOK_SECRET":          "whsec_stripe_current",
	"STRIPE_WEBHOOK_SECRET_PREVIOUS": "whsec_stripe_previous",
	"GITHUB_WEBHOOK_SECRET":          "github-secret",
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestPath(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{"FlagWinsOverEnv", "/etc/hookgate/flag.yaml", map[string]string{"HOOKGATE_CONFIG": "/etc/hookgate/env.yaml"}, "/etc/hookgate/flag.yaml"},
		{"FlagAlone", "flag.yaml", nil, "flag.yaml"},
		{"EnvWithoutFlag", "", map[string]string{"HOOKGATE_CONFIG": "/etc/hookgate/env.yaml"}, "/etc/hookgate/env.yaml"},
		{"EmptyEnvIsUnset", "", map[string]string{"HOOKGATE_CONFIG": ""}, DefaultPath},
		{"Default", "", nil, "hookgate.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Path(tt.flag, mapEnv(tt.env)))
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()

		c, err := Load("testdata/valid.yaml")
		require.NoError(t, err)
		require.Len(t, c.Providers, 2)
		require.Len(t, c.Routes, 2)
		p, ok := c.Provider("acme")
		require.True(t, ok)
		require.Equal(t, SchemeHMAC, p.Scheme)
		require.Equal(t, "header:X-Acme-Delivery", p.IDFrom)
	})

	t.Run("MissingFile", func(t *testing.T) {
		t.Parallel()

		_, err := Load("testdata/does-not-exist.yaml")
		require.EqualError(t, err, "config file testdata/does-not-exist.yaml does not exist (set --config or HOOKGATE_CONFIG)")
	})

	t.Run("Directory", func(t *testing.T) {
		t.Parallel()

		_, err := Load("testdata")
		require.ErrorContains(t, err, "reading config file testdata: ")
	})

	t.Run("EmptyFile", func(t *testing.T) {
		t.Parallel()

		path := filepath.Join(t.TempDir(), "hookgate.yaml")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		_, err := Load(path)
		require.EqualError(t, err, "config file "+path+": is empty")
	})

	t.Run("InvalidNamesFileAndEveryProblem", func(t *testing.T) {
		t.Parallel()

		_, err := Load("testdata/invalid.yaml")
		require.EqualError(t, err, "config file testdata/invalid.yaml: "+
			`routes[0].provider: "strpe" is not a configured provider`+"\n"+
			`routes[0].url: "/hooks/stripe" must be an absolute http or https URL`)
	})

	t.Run("SyntaxErrorNamesFile", func(t *testing.T) {
		t.Parallel()

		path := filepath.Join(t.TempDir(), "hookgate.yaml")
		require.NoError(t, os.WriteFile(path, []byte("providers:\n\t- name: stripe\n"), 0o600))
		_, err := Load(path)
		require.ErrorContains(t, err, "config file "+path+": yaml: line 2: ")
	})
}

// minimal is the smallest valid file: one provider and one route, everything
// else left to defaults.
const minimal = `
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [STRIPE_WEBHOOK_SECRET]
routes:
  - name: ship-order
    provider: stripe
    events: ["invoice.*"]
    url: http://shipments.internal/hooks/stripe
`

// defaultBreaker is a route's breaker when the file says nothing of it.
var defaultBreaker = Breaker{Failures: 10, CoolDown: Duration(30 * time.Second), MaxCoolDown: Duration(10 * time.Minute)}

func TestParseDefaults(t *testing.T) {
	t.Parallel()

	c, err := Parse([]byte(minimal))
	require.NoError(t, err)
	require.Equal(t, &Config{
		Ingest: Ingest{
			Listen:       ":8080",
			MaxBodyBytes: 1 << 20,
			ClaimTimeout: Duration(5 * time.Second),
			MaxInFlight:  256,
		},
		Worker: Worker{
			Listen:            ":9091",
			Concurrency:       100,
			RescueAfter:       Duration(10 * time.Minute),
			ShutdownTimeout:   Duration(30 * time.Second),
			ReconcileInterval: Duration(time.Minute),
		},
		Retention: Retention{
			Claims:    Duration(2160 * time.Hour),
			Payloads:  Duration(168 * time.Hour),
			Interval:  Duration(time.Hour),
			BatchSize: 1000,
		},
		Providers: []Provider{{
			Name:               "stripe",
			Scheme:             SchemeStripe,
			SecretsEnv:         []string{"STRIPE_WEBHOOK_SECRET"},
			Tolerance:          Duration(5 * time.Minute),
			OnFailedRedelivery: RedeliveryReopen,
			ReplayGuard:        ReplayGuardOff,
		}},
		Routes: []Route{{
			Name:        "ship-order",
			Provider:    "stripe",
			Events:      []string{"invoice.*"},
			URL:         "http://shipments.internal/hooks/stripe",
			Timeout:     Duration(10 * time.Second),
			MaxAttempts: 10,
			Backoff:     Backoff{Initial: Duration(time.Second), Max: Duration(time.Hour)},
			Concurrency: 100,

			Method:            "POST",
			IdempotencyHeader: "Idempotency-Key",
			Breaker:           defaultBreaker,
		}},
	}, c)
}

func TestParseRetryStatuses(t *testing.T) {
	t.Parallel()

	c, err := Parse([]byte(minimal + "    retry_statuses: [404, 423]\n"))
	require.NoError(t, err)
	require.Equal(t, []int{404, 423}, c.Routes[0].RetryStatuses)

	_, err = Parse([]byte(minimal + "    retry_statuses: [404, 502]\n"))
	require.EqualError(t, err, "routes[0].retry_statuses[1]: 502 is not a 4xx status: retry_statuses lists codes from 400 to 499")

	_, err = Parse([]byte(minimal + "    retry_statuses: [not-found]\n"))
	require.ErrorContains(t, err, "line 11")
}

// An explicit zero is indistinguishable from a missing key and takes the
// default, as with every cmp.Or default; only negative values reach validation.
func TestParseZeroTakesDefault(t *testing.T) {
	t.Parallel()

	c, err := Parse([]byte(`
ingest: {max_body_bytes: 0, claim_timeout: 0s}
worker: {concurrency: 0, rescue_after: 0s}
providers:
  - {name: stripe, scheme: stripe, secrets_env: [S], tolerance: 0s}
routes:
  - {name: r, provider: stripe, events: ["*"], url: "http://a.internal/", timeout: 0s, max_attempts: 0, concurrency: 0}
`))
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), c.Ingest.MaxBodyBytes)
	require.Equal(t, 5*time.Second, c.Ingest.ClaimTimeout.D())
	require.Equal(t, 100, c.Worker.Concurrency)
	require.Equal(t, 10*time.Minute, c.Worker.RescueAfter.D())
	require.Equal(t, 5*time.Minute, c.Providers[0].Tolerance.D())
	require.Equal(t, 10*time.Second, c.Routes[0].Timeout.D())
	require.Equal(t, 10, c.Routes[0].MaxAttempts)
	require.Equal(t, 100, c.Routes[0].Concurrency)
}

// A route without concurrency takes worker.concurrency, whatever it is.
func TestParseRouteConcurrency(t *testing.T) {
	t.Parallel()

	c, err := Parse([]byte(`
worker: {concurrency: 7}
providers:
  - {name: stripe, scheme: stripe, secrets_env: [S]}
routes:
  - {name: inherits, provider: stripe, events: ["*"], url: "http://a.internal/"}
  - {name: own, provider: stripe, events: ["*"], url: "http://a.internal/", concurrency: 2}
  - {name: more, provider: stripe, events: ["*"], url: "http://a.internal/", concurrency: 50}
`))
	require.NoError(t, err)
	require.Equal(t, 7, c.Routes[0].Concurrency)
	require.Equal(t, 2, c.Routes[1].Concurrency)
	require.Equal(t, 50, c.Routes[2].Concurrency, "a route may run more at once than the worker's default")
}

func TestParseKeepsEveryKey(t *testing.T) {
	t.Parallel()

	c, err := Parse([]byte(`
ingest:
  listen: "127.0.0.1:18080"
  max_body_bytes: 65536
  claim_timeout: 2s
  max_in_flight: 32
worker:
  listen: ":19091"
  concurrency: 7
  rescue_after: 1h
  shutdown_timeout: 45s
  reconcile_interval: 90s
retention:
  claims: 720h
  payloads: 24h
  interval: 10m
  batch_size: 250
providers:
  - name: acme
    scheme: hmac
    secrets_env: [ACME_NEW, ACME_OLD]
    tolerance: 1m
    on_failed_redelivery: ack
    replay_guard: body
    header: X-Acme-Signature
    prefix: "sha256="
    encoding: base64
    id_from: json:event.id
    type_from: header:X-Acme-Event
    timestamp_header: X-Acme-Timestamp
routes:
  - name: acme-orders
    provider: acme
    events: ["order.*", "refund.created"]
    url: https://orders.internal/hooks/acme
    timeout: 30s
    max_attempts: 3
    backoff: { initial: 500ms, max: 2m }
    signing_secret_env: ACME_ORDERS_SIGNING_SECRET
    business_key: [type, "json:order.id", "header:X-Acme-Shop"]
    concurrency: 4
    filter: '.order.total > 0'
    method: PATCH
    headers: { Accept: application/json }
    secret_headers: { Authorization: ACME_ORDERS_AUTHORIZATION }
    idempotency_header: X-Idempotency-Key
    body: '{total: .order.total}'
    result: .id
    success: '.body.ok == true'
    breaker: { failures: 3, cool_down: 5s, max_cool_down: 1m }
    tls: { ca_file: /etc/ca.pem, cert_file: /etc/client.pem, key_file: /etc/client-key.pem }
`))
	require.NoError(t, err)
	require.Equal(t, &Config{
		Ingest: Ingest{Listen: "127.0.0.1:18080", MaxBodyBytes: 65536, ClaimTimeout: Duration(2 * time.Second), MaxInFlight: 32},
		Worker: Worker{
			Listen:            ":19091",
			Concurrency:       7,
			RescueAfter:       Duration(time.Hour),
			ShutdownTimeout:   Duration(45 * time.Second),
			ReconcileInterval: Duration(90 * time.Second),
		},
		Retention: Retention{Claims: Duration(720 * time.Hour), Payloads: Duration(24 * time.Hour),
			Interval: Duration(10 * time.Minute), BatchSize: 250},
		Providers: []Provider{{
			Name:               "acme",
			Scheme:             SchemeHMAC,
			SecretsEnv:         []string{"ACME_NEW", "ACME_OLD"},
			Tolerance:          Duration(time.Minute),
			OnFailedRedelivery: RedeliveryAck,
			ReplayGuard:        ReplayGuardBody,
			Header:             "X-Acme-Signature",
			Prefix:             "sha256=",
			Encoding:           "base64",
			IDFrom:             "json:event.id",
			TypeFrom:           "header:X-Acme-Event",
			TimestampHeader:    "X-Acme-Timestamp",
		}},
		Routes: []Route{{
			Name:             "acme-orders",
			Provider:         "acme",
			Events:           []string{"order.*", "refund.created"},
			URL:              "https://orders.internal/hooks/acme",
			Timeout:          Duration(30 * time.Second),
			MaxAttempts:      3,
			Backoff:          Backoff{Initial: Duration(500 * time.Millisecond), Max: Duration(2 * time.Minute)},
			SigningSecretEnv: "ACME_ORDERS_SIGNING_SECRET",
			BusinessKey:      []string{"type", "json:order.id", "header:X-Acme-Shop"},
			Concurrency:      4,

			Filter:            ".order.total > 0",
			Method:            "PATCH",
			Headers:           map[string]string{"Accept": "application/json"},
			SecretHeaders:     map[string]string{"Authorization": "ACME_ORDERS_AUTHORIZATION"},
			IdempotencyHeader: "X-Idempotency-Key",
			Success:           ".body.ok == true",
			Breaker:           Breaker{Failures: 3, CoolDown: Duration(5 * time.Second), MaxCoolDown: Duration(time.Minute)},
			Body:              "{total: .order.total}",
			Result:            ".id",
			TLS:               TLS{CAFile: "/etc/ca.pem", CertFile: "/etc/client.pem", KeyFile: "/etc/client-key.pem"},
		}},
	}, c)
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"NoBytes", "", "is empty"},
		{"Blank", "\n\n  \n", "is empty"},
		{"OnlyComments", "# hookgate\n# nothing yet\n", "is empty"},
		{"EmptyMapping", "{}\n", "providers: at least one provider is required"},
		{"Null", "null\n", "providers: at least one provider is required"},
		{"DocumentMarkerOnly", "---\n", "providers: at least one provider is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			c, err := Parse([]byte(tt.doc))
			require.EqualError(t, err, tt.want)
			require.Nil(t, c)
		})
	}
}

// header is a valid provider and the start of a routes list, on lines 1 and 2,
// for decode tests that add a route beginning on line 3.
const header = "providers: [{name: stripe, scheme: stripe, secrets_env: [S]}]\nroutes:\n"

// route is a valid route on lines 3 to 6; a key added after it is on line 7.
const route = header + `  - name: r
    provider: stripe
    events: ["*"]
    url: http://a.internal/
`

func TestParseStrict(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"UnknownTopLevel", "bogus: 1\n" + route, `line 1: unknown key "bogus" (in config)`},
		{"MisspelledTopLevel", route + "route:\n  - name: x\n", `line 7: unknown key "route" (in config)`},
		{"UnknownInIngest", "ingest:\n  max_body: 10\n" + route, `line 2: unknown key "max_body" (in ingest)`},
		{"UnknownInWorker", "worker:\n  concurency: 5\n" + route, `line 2: unknown key "concurency" (in worker)`},
		{"UnknownInRetention", "retention:\n  events: 24h\n" + route, `line 2: unknown key "events" (in retention)`},
		{
			"UnknownInProvider",
			"providers: [{name: stripe, scheme: stripe, secret_env: [S]}]\n",
			`line 1: unknown key "secret_env" (in provider)`,
		},
		{"UnknownInRoute", route + "    retries: 3\n", `line 7: unknown key "retries" (in route)`},
		{"UnknownInBackoff", route + "    backoff: {initial: 1s, maximum: 1h}\n", `line 7: unknown key "maximum" (in backoff)`},
		{
			"EveryUnknownKey",
			"bogus: 1\n" + route + "    retries: 3\n",
			"line 1: unknown key \"bogus\" (in config)\nline 8: unknown key \"retries\" (in route)",
		},
		{"WrongType", "worker:\n  concurrency: many\n" + route, "line 2: cannot unmarshal !!str `many` into int"},
		{"ScalarForList", "providers: [{name: stripe, scheme: stripe, secrets_env: S}]\n", "line 1: cannot unmarshal !!str `S` into []string"},
		{"DuplicateKey", "ingest: {listen: a}\ningest: {listen: b}\n" + route, `line 2: mapping key "ingest" already defined at line 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := Parse([]byte(tt.doc))
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestParseDurations(t *testing.T) {
	t.Parallel()

	const notDuration = " is not a duration (use e.g. 10s, 5m, 2160h)"
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"Parsecs", route + "    timeout: 10 parsecs\n", `line 7: "10 parsecs"` + notDuration},
		{"NoUnit", route + "    timeout: 10\n", `line 7: "10"` + notDuration},
		{"Days", "retention:\n  claims: 90d\n" + route, `line 2: "90d"` + notDuration},
		{"Words", "worker:\n  rescue_after: ten minutes\n" + route, `line 2: "ten minutes"` + notDuration},
		{"EmptyString", route + `    timeout: ""` + "\n", `line 7: ""` + notDuration},
		{"InFlowBackoff", route + "    backoff: {initial: soon, max: 1h}\n", `line 7: "soon"` + notDuration},
		{"InBlockBackoff", route + "    backoff:\n      initial: 1s\n      max: forever\n", `line 9: "forever"` + notDuration},
		{
			"Tolerance",
			"providers: [{name: stripe, scheme: stripe, secrets_env: [S], tolerance: 5 min}]\n",
			`line 1: "5 min"` + notDuration,
		},
		{"List", route + "    timeout: [10s]\n", "line 7: want a duration such as 10s or 5m"},
		{"Mapping", route + "    timeout: {seconds: 10}\n", "line 7: want a duration such as 10s or 5m"},

		// Negative durations decode, then fail validation with the key path.
		{"NegativeTimeout", route + "    timeout: -5s\n", "routes[0].timeout: must be a positive duration, got -5s"},
		{"NegativeBackoff", route + "    backoff: {initial: -1s}\n", "routes[0].backoff.initial: must be a positive duration, got -1s"},
		{"NegativeTolerance", "providers: [{name: s, scheme: stripe, secrets_env: [S], tolerance: -1m}]\n", "providers[0].tolerance: must be a positive duration, got -1m0s"},
		{"NegativeClaimTimeout", "ingest: {claim_timeout: -1s}\n" + route, "ingest.claim_timeout: must be a positive duration, got -1s"},
		{"NegativeRescueAfter", "worker: {rescue_after: -10m}\n" + route, "worker.rescue_after: must be a positive duration, got -10m0s"},
		{"NegativeShutdownTimeout", "worker: {shutdown_timeout: -30s}\n" + route, "worker.shutdown_timeout: must be a positive duration, got -30s"},
		{"NegativeReconcileInterval", "worker: {reconcile_interval: -1m}\n" + route, "worker.reconcile_interval: must be a positive duration, got -1m0s"},
		{"TrustedProxy", "worker: {trusted_proxies: [10.0.0.0/8, 10.1.2.300]}\n" + route, `worker.trusted_proxies[1]: "10.1.2.300" must be an IP address or a CIDR range such as 10.0.0.0/8`},
		{"NegativeRetentionClaims", "retention: {claims: -1h}\n" + route, "retention.claims: must be a positive duration, got -1h0m0s"},
		{"NegativeRetentionPayloads", "retention: {payloads: -1h}\n" + route, "retention.payloads: must be a positive duration, got -1h0m0s"},
		{"NegativeRetentionInterval", "retention: {interval: -1h}\n" + route, "retention.interval: must be a positive duration, got -1h0m0s"},
		{"NegativeRetentionBatchSize", "retention: {batch_size: -1}\n" + route, "retention.batch_size: must be between 1 and 100000, got -1"},
		{"PayloadsDefaultOutlivesClaims", "retention: {claims: 24h}\n" + route,
			"retention.payloads: 168h0m0s is longer than retention.claims (24h0m0s): a payload cannot outlive its claim"},

		// And negative numbers likewise.
		{"NegativeMaxAttempts", route + "    max_attempts: -1\n", "routes[0].max_attempts: must be at least 1, got -1"},
		{"NegativeConcurrency", "worker: {concurrency: -1}\n" + route, "worker.concurrency: must be at least 1, got -1"},
		{"NegativeMaxBodyBytes", "ingest: {max_body_bytes: -1}\n" + route, "ingest.max_body_bytes: must be at least 1, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := Parse([]byte(tt.doc))
			require.EqualError(t, err, tt.want)
		})
	}

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()

		c, err := Parse([]byte(route + "    timeout: 1m30s\n    backoff: {initial: 250ms, max: 2h45m}\n"))
		require.NoError(t, err)
		require.Equal(t, 90*time.Second, c.Routes[0].Timeout.D())
		require.Equal(t, 250*time.Millisecond, c.Routes[0].Backoff.Initial.D())
		require.Equal(t, 2*time.Hour+45*time.Minute, c.Routes[0].Backoff.Max.D())
	})
}

func TestDurationMarshalYAML(t *testing.T) {
	t.Parallel()

	type doc struct {
		Timeout Duration `yaml:"timeout"`
	}
	b, err := yaml.Marshal(doc{Timeout: Duration(90 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, "timeout: 1m30s\n", string(b))

	var back doc
	require.NoError(t, yaml.Unmarshal(b, &back))
	require.Equal(t, Duration(90*time.Second), back.Timeout)
}

func TestConfigLookups(t *testing.T) {
	t.Parallel()

	c := setup(t)

	p, ok := c.Provider("stripe")
	require.True(t, ok)
	require.Equal(t, SchemeStripe, p.Scheme)
	_, ok = c.Provider("strpe")
	require.False(t, ok)

	r, ok := c.Route("acme-all")
	require.True(t, ok)
	require.Equal(t, "acme", r.Provider)
	_, ok = c.Route("ship_order")
	require.False(t, ok)
}

func TestExampleFile(t *testing.T) {
	t.Parallel()

	t.Run("LoadsAndResolvesSecrets", func(t *testing.T) {
		t.Parallel()

		c, err := Load(examplePath)
		require.NoError(t, err)

		s, err := c.ResolveSecrets(mapEnv(exampleEnv))
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("whsec_stripe_current"), []byte("whsec_stripe_previous")}, s.Provider["stripe"])
		require.Len(t, s.Provider, 3)
		require.Empty(t, s.Route)

		require.Equal(t, ":8080", c.Ingest.Listen)
		require.Equal(t, ":9091", c.Worker.Listen)

		var names []string
		for _, p := range c.Providers {
			names = append(names, p.Name+"="+p.Scheme)
		}
		require.Equal(t, []string{"demo=standard-webhooks", "stripe=stripe", "github=github"}, names)
		p, _ := c.Provider("demo")
		require.Equal(t, []string{"DEMO_WEBHOOK_SECRET"}, p.SecretsEnv)
		p, _ = c.Provider("github")
		require.Equal(t, []string{"GITHUB_WEBHOOK_SECRET"}, p.SecretsEnv)

		demo, ok := c.Route("demo-receiver")
		require.True(t, ok)
		require.Equal(t, Route{
			Name:        "demo-receiver",
			Provider:    "demo",
			Events:      []string{"*"},
			URL:         "http://127.0.0.1:9099/hooks/demo",
			Timeout:     Duration(10 * time.Second),
			MaxAttempts: 5,
			Backoff:     Backoff{Initial: Duration(time.Second), Max: Duration(time.Minute)},
			Concurrency: 10,

			Method:            "POST",
			IdempotencyHeader: "Idempotency-Key",
			// The demo route opens sooner than the default, for `send-demo --fail`.
			Breaker: Breaker{Failures: 3, CoolDown: Duration(10 * time.Second), MaxCoolDown: Duration(20 * time.Second)},
		}, demo)

		ship, ok := c.Route("ship-order")
		require.True(t, ok)
		require.Equal(t, "stripe", ship.Provider)
		require.Equal(t, []string{"checkout.session.completed", "invoice.*"}, ship.Events)
		require.Equal(t, "http://127.0.0.1:9099/hooks/stripe", ship.URL)

		require.True(t, ship.Matches("invoice.paid"))
		require.True(t, demo.Matches("user.created"))
		require.False(t, ship.Matches("charge.refunded"))
	})

	t.Run("ShowsEveryKey", func(t *testing.T) {
		t.Parallel()

		b, err := os.ReadFile(examplePath)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal(b, &doc))

		for section, keys := range map[string][]string{
			"ingest":    {"listen", "max_body_bytes", "claim_timeout", "max_in_flight"},
			"worker":    {"listen", "concurrency", "rescue_after", "shutdown_timeout", "reconcile_interval"},
			"retention": {"claims", "payloads", "interval", "batch_size"},
		} {
			m, ok := doc[section].(map[string]any)
			require.True(t, ok, "section %s", section)
			for _, k := range keys {
				require.Contains(t, m, k, "%s.%s", section, k)
			}
		}
		provider := doc["providers"].([]any)[0].(map[string]any)
		for _, k := range []string{"name", "scheme", "secrets_env", "tolerance", "on_failed_redelivery", "replay_guard"} {
			require.Contains(t, provider, k, "providers[0].%s", k)
		}
		route := doc["routes"].([]any)[0].(map[string]any)
		for _, k := range []string{"name", "provider", "events", "url", "timeout", "max_attempts", "backoff", "concurrency"} {
			require.Contains(t, route, k, "routes[0].%s", k)
		}
		// Optional keys are shown commented out; HMACExampleIsValid checks
		// the hmac ones decode.
		require.Contains(t, string(b), "# signing_secret_env: ")
	})

	// The commented-out hmac provider is valid once uncommented.
	t.Run("HMACExampleIsValid", func(t *testing.T) {
		t.Parallel()

		b, err := os.ReadFile(examplePath)
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		in := false
		uncommented := 0
		for i, line := range lines {
			if strings.HasPrefix(line, "  # - name: acme") {
				in = true
			}
			if in && !strings.HasPrefix(line, "  #") {
				break
			}
			if in {
				lines[i] = strings.Replace(line, "# ", "", 1)
				uncommented++
			}
		}
		require.Greater(t, uncommented, 5, "hmac example not found in %s", examplePath)

		c, err := Parse([]byte(strings.Join(lines, "\n")))
		require.NoError(t, err)
		p, ok := c.Provider("acme")
		require.True(t, ok)
		require.Equal(t, Provider{
			Name:               "acme",
			Scheme:             SchemeHMAC,
			SecretsEnv:         []string{"ACME_WEBHOOK_SECRET"},
			Tolerance:          Duration(5 * time.Minute),
			OnFailedRedelivery: RedeliveryReopen,
			ReplayGuard:        ReplayGuardOff,
			Header:             "X-Acme-Signature",
			Prefix:             "sha256=",
			Encoding:           "hex",
			IDFrom:             "header:X-Acme-Delivery",
			TypeFrom:           "json:event.type",
			TimestampHeader:    "X-Acme-Timestamp",
		}, p)
	})
}

// TestReplayGuardDefaults: body for the schemes whose signature does not
// cover the event id, off for those that sign it; YAML's off is a string.
func TestReplayGuardDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
providers:
  - {name: s, scheme: stripe, secrets_env: [A]}
  - {name: sw, scheme: standard-webhooks, secrets_env: [A]}
  - {name: gh, scheme: github, secrets_env: [A]}
  - {name: shop, scheme: shopify, secrets_env: [A]}
  - {name: h-header, scheme: hmac, secrets_env: [A], header: X-Sig, encoding: hex, id_from: "header:X-Id"}
  - {name: h-header-ts, scheme: hmac, secrets_env: [A], header: X-Sig, encoding: hex, id_from: "header:X-Id", timestamp_header: X-Ts}
  - {name: h-json, scheme: hmac, secrets_env: [A], header: X-Sig, encoding: hex, id_from: "json:id"}
  - {name: gh-off, scheme: github, secrets_env: [A], replay_guard: off}
  - {name: s-body, scheme: stripe, secrets_env: [A], replay_guard: body}
`))
	require.NoError(t, err)
	got := map[string]string{}
	for _, p := range c.Providers {
		got[p.Name] = p.ReplayGuard
	}
	require.Equal(t, map[string]string{
		"s": "off", "sw": "off", "gh": "body", "shop": "body", "h-header": "body",
		"h-header-ts": "off", "h-json": "off", "gh-off": "off", "s-body": "body",
	}, got)
}

// The worked example in docs/n8n.md is a config that loads, so that the
// guide cannot drift from what the binaries accept.
func TestN8NGuideConfig(t *testing.T) {
	t.Parallel()

	b, err := os.ReadFile("../../docs/n8n.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	require.True(t, ok, "the guide has a yaml block")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	c, err := Parse([]byte(block))
	require.NoError(t, err)
	_, err = c.ResolveSecrets(mapEnv(map[string]string{
		"STRIPE_WEBHOOK_SECRET": "whsec_x", "SHIPPER_AUTHORIZATION": "Bearer sk_test", "N8N_WEBHOOK_TOKEN": "tok",
	}))
	require.NoError(t, err)
	ship, ok := c.Route("create-shipment")
	require.True(t, ok)
	require.Equal(t, "X-Idempotency-Key", ship.IdempotencyHeader)
	require.Equal(t, "{id: .id}", ship.Result)
	label, ok := c.Route("buy-label")
	require.True(t, ok)
	require.Equal(t, []string{"create-shipment"}, label.After, "the worked example is a chain")
	require.NotEmpty(t, label.Path)
	notify, ok := c.Route("notify-ops")
	require.True(t, ok)
	require.Equal(t, []int{404}, notify.RetryStatuses, "n8n answers 404 while it registers its webhooks")
	require.Equal(t, []string{"buy-label"}, notify.After)
	require.Greater(t, notify.Timeout.D(), 10*time.Second, "a timeout above the workflow's run, not the default")
	for _, listen := range []string{c.Ingest.Listen, c.Worker.Listen} {
		host, _, err := net.SplitHostPort(listen)
		require.NoError(t, err)
		require.NotContains(t, []string{"", "0.0.0.0", "::"}, host, "the guide binds %q, not every interface", listen)
	}
}
