// Package config loads and validates hookgate's YAML configuration, the one place
// where defaults and their meaning are written down.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultPath is the config file read when neither --config nor HOOKGATE_CONFIG names one.
const DefaultPath = "hookgate.yaml"

// Config is the whole configuration file. Secrets never appear in it: providers
// and routes name the environment variables that hold them.
type Config struct {
	Ingest    Ingest     `yaml:"ingest"`
	Worker    Worker     `yaml:"worker"`
	Retention Retention  `yaml:"retention"`
	Providers []Provider `yaml:"providers"`
	Routes    []Route    `yaml:"routes"`
	// Console configures the operator API and web console; off when empty.
	Console Console `yaml:"console"`
}

// Ingest configures the webhook endpoint.
type Ingest struct {
	// Listen is the address the endpoint serves on. Default ":8080".
	Listen string `yaml:"listen"`
	// MaxBodyBytes is the largest request body accepted; larger bodies get 413.
	// Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ClaimTimeout bounds the claim transaction, so that a provider hears 503
	// within a few seconds when Postgres hangs instead of timing out itself.
	// Default 5s.
	ClaimTimeout Duration `yaml:"claim_timeout"`
	// MaxInFlight bounds the webhook requests being read or claimed at once.
	// Past it a request is answered 503 with Retry-After: 1 before its body
	// is read, so unverified bodies hold at most about MaxInFlight ×
	// MaxBodyBytes of memory. Default 256.
	MaxInFlight int `yaml:"max_in_flight"`
}

// Worker configures the process that performs side effects.
type Worker struct {
	// Listen serves /healthz, /readyz, /metrics and the River UI. Default ":9091".
	Listen string `yaml:"listen"`
	// Concurrency is how many deliveries one worker attempts at once to each
	// route that sets no concurrency of its own, and to routes no longer
	// configured. Default 100.
	Concurrency int `yaml:"concurrency"`
	// RescueAfter is how long a job may stay running before it is taken for
	// crashed and made retryable. It must exceed every route's timeout by
	// the run's end bound (see EndBound), or a slow but live run would
	// overlap with its rescued copy. Default 10m.
	RescueAfter Duration `yaml:"rescue_after"`
	// ShutdownTimeout is how long SIGTERM waits for in-flight attempts before
	// cancelling them; a cancelled attempt returns its job to the queue.
	// Default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// ReconcileInterval is how often the reconciler looks for deliveries left
	// processing without a live job. Default 1m.
	ReconcileInterval Duration `yaml:"reconcile_interval"`
	// TrustedProxies are the addresses (an IP or a CIDR range) of the
	// reverse proxies in front of the listener: a sign-in through one of
	// them is counted, for the failed sign-in limit, under the client its
	// X-Forwarded-For names. Empty (the default) believes no header: every
	// request counts under its connection's address.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// Proxies returns TrustedProxies as prefixes (a bare IP as its /32 or
// /128); entries that do not parse, which validation refuses, are left out.
func (w Worker) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range w.TrustedProxies {
		if p, ok := parseProxy(s); ok {
			out = append(out, p)
		}
	}
	return out
}

func parseProxy(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// maxEndBound caps Worker.EndBound: 5s to load a delivery, 2 × 10s to
// record its outcome.
const maxEndBound = 25 * time.Second

// EndBound is how long past its route's timeout one delivery run may last:
// a grace to load the delivery before the call (a fifth of it), then up to
// two record transactions after it, the batch in flight and its own (two
// fifths each). It is a quarter of rescue_after, at most 25s, so that short
// configs (a test's) stay valid. A route's timeout plus it must be shorter
// than rescue_after: a run then always returns before River's rescuer can
// take its job. That is the attempt fence River's own completion lacks: a
// run that returned after its job was rescued and started again would end
// the newer run's job (River sets a job's final state by id while it is
// running, whatever its attempt).
func (w Worker) EndBound() time.Duration { return min(w.RescueAfter.D()/4, maxEndBound) }

// Retention says how long terminal claims and their payloads are kept. Ages
// count from the moment a claim last became terminal; processing claims are
// never touched.
type Retention struct {
	// Claims: terminal claims older than this are deleted with their
	// deliveries; a redelivery after that is treated as new. Default 2160h (90 days).
	Claims Duration `yaml:"claims"`
	// Payloads: raw bodies of terminal claims are cleared after this; it
	// may not exceed Claims. Default 168h (7 days).
	Payloads Duration `yaml:"payloads"`
	// Interval is how often the worker applies retention (River's leader
	// schedules it, so replicas do not multiply it). Default 1h.
	Interval Duration `yaml:"interval"`
	// BatchSize is how many claims one retention statement deletes or
	// clears, each in a short transaction of its own, so that a large
	// backlog never holds many row locks at once. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// Audit: operator audit rows older than this are deleted. They are not
	// tied to claims, so they outlive them. Default 8760h (365 days); see
	// AuditAge.
	Audit Duration `yaml:"audit"`
}

// DefaultAuditRetention is retention.audit when unset.
const DefaultAuditRetention = 365 * 24 * time.Hour

// AuditAge is retention.audit, or its default when unset.
func (r Retention) AuditAge() time.Duration { return cmp.Or(r.Audit.D(), DefaultAuditRetention) }

// Scheme names accepted in Provider.Scheme.
const (
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeHMAC             = "hmac"
	SchemePaddle           = "paddle"
	SchemeSquare           = "square"
	SchemeEasyPost         = "easypost"
	SchemeAdyen            = "adyen"
	SchemePayPal           = "paypal"
	SchemeEd25519          = "ed25519"
	SchemeECDSA            = "ecdsa"
)

// Values of Provider.ReplayGuard.
const (
	ReplayGuardOff  = "off"
	ReplayGuardBody = "body"
)

// Values of Provider.OnFailedRedelivery.
const (
	RedeliveryReopen = "reopen"
	RedeliveryAck    = "ack"
)

// Provider is one webhook sender, served at POST /webhooks/{Name}.
type Provider struct {
	// Name is the URL path segment and the first half of every delivery key.
	Name string `yaml:"name"`
	// Scheme is the signature scheme: stripe, github, shopify,
	// standard-webhooks, hmac, paddle, square, easypost, adyen, paypal,
	// ed25519 or ecdsa.
	Scheme string `yaml:"scheme"`
	// SecretsEnv names environment variables holding signing secrets; a
	// request signed with any one of them is accepted, which is how secrets
	// rotate. Every scheme but paypal, ed25519 and ecdsa needs at least one.
	SecretsEnv []string `yaml:"secrets_env"`
	// SecretsFile names files holding signing secrets, beside SecretsEnv
	// (a mounted Kubernetes secret): ingest reads them at start and again
	// whenever they change, so a rotation needs no restart. One trailing
	// newline is not part of the secret.
	SecretsFile []string `yaml:"secrets_file"`
	// PublicKeysEnv names environment variables holding public keys, for
	// ed25519 and ecdsa (which have no secret); any one may verify.
	PublicKeysEnv []string `yaml:"public_keys_env"`
	// PublicKeysFile names files holding public keys, as SecretsFile.
	PublicKeysFile []string `yaml:"public_keys_file"`
	// Tolerance is how far a signed timestamp may be from now, in either
	// direction, for schemes that sign one. Default 5m.
	Tolerance Duration `yaml:"tolerance"`
	// OnFailedRedelivery is what a redelivery of a failed event does: reopen
	// (run the failed deliveries again) or ack (answer duplicate). Default reopen.
	OnFailedRedelivery string `yaml:"on_failed_redelivery"`
	// ReplayGuard is off or body. With body, a verified body byte-identical
	// to the body of an existing claim of this provider under another event
	// id is a duplicate: it defends schemes whose signature does not cover
	// the id against a captured request re-sent under a new id, at the cost
	// of collapsing two distinct events that happen to have identical
	// bodies. Default body for github, shopify, and hmac with a header id
	// and no timestamp_header, and ed25519 and ecdsa with a header id; off
	// for the others, which sign the id.
	ReplayGuard string `yaml:"replay_guard"`
	// ScopeFrom, optional on any scheme, is "header:NAME" or
	// "json:dotted.path": a verified value that is joined to the event id
	// (scope:id), for providers whose ids are unique only per account or
	// shop. A request without it is refused with 400. Changing it changes
	// the delivery keys of the provider's events.
	ScopeFrom string `yaml:"scope_from"`

	// NotificationURL is the URL Square signs in front of the body (square only).
	NotificationURL string `yaml:"notification_url"`
	// WebhookID is the id PayPal gave the webhook (paypal only).
	WebhookID string `yaml:"webhook_id"`
	// CertFile is PayPal's signing certificate, a PEM file or a directory
	// of them, read at start (paypal only).
	CertFile string `yaml:"cert_file"`
	// CAFile is the PEM bundle the certificates must chain to (paypal only).
	CAFile string `yaml:"ca_file"`

	// The fields below apply to the generic hmac scheme; header, encoding,
	// id_from, type_from and timestamp_header also to ed25519 and ecdsa.

	// Header holds the signature.
	Header string `yaml:"header"`
	// Prefix is stripped from the header value before decoding, e.g. "sha256=".
	Prefix string `yaml:"prefix"`
	// Encoding of the signature: hex or base64.
	Encoding string `yaml:"encoding"`
	// IDFrom is where the event id comes from: "header:NAME" or "json:dotted.path".
	IDFrom string `yaml:"id_from"`
	// TypeFrom is where the event type comes from, same syntax; optional.
	TypeFrom string `yaml:"type_from"`
	// TimestampHeader, when set, names a header with a unix timestamp that is
	// signed as timestamp + "." + body and checked against Tolerance.
	TimestampHeader string `yaml:"timestamp_header"`
}

// Route sends the events of one provider that match Events to one URL. Each
// matching event becomes one delivery with its own job, attempts and key.
type Route struct {
	// Name is the route's identity: it is part of the downstream
	// Idempotency-Key, so renaming a route with deliveries in flight changes their key.
	Name string `yaml:"name"`
	// Provider is the Name of the provider whose events this route takes.
	Provider string `yaml:"provider"`
	// Events are exact event types or globs ("invoice.*"); "*" alone matches
	// every type. A glob's * does not cross "/" (Shopify topics: "orders/*").
	Events []string `yaml:"events"`
	// URL receives a POST per attempt; absolute http or https.
	URL string `yaml:"url"`
	// Timeout bounds one attempt. Default 10s.
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts is how many attempts a delivery gets before it fails. Default 10.
	MaxAttempts int `yaml:"max_attempts"`
	// Backoff shapes the delay between attempts.
	Backoff Backoff `yaml:"backoff"`
	// RetryStatuses lists 4xx statuses (400-499) that this route retries
	// with its backoff, as it does 5xx: for a downstream that answers, say,
	// 404 while it starts. Every other 4xx still fails the delivery at once.
	RetryStatuses []int `yaml:"retry_statuses"`
	// SigningSecretEnv optionally names a variable holding a Standard Webhooks
	// secret (whsec_...) used to sign what is forwarded.
	SigningSecretEnv string `yaml:"signing_secret_env"`
	// SigningSecretFile names a file holding that secret instead, as a
	// mounted Kubernetes Secret: read at start and again when it changes,
	// so a rotation needs no restart. At most one of the two.
	SigningSecretFile string `yaml:"signing_secret_file"`
	// BusinessKey optionally lists where the route's business key comes
	// from: "type", "json:dotted.path" into the body, "header:NAME". The
	// first claim with a given key gets the route's delivery; a later one
	// (another event id) gets a skipped delivery. Nil means no business key:
	// only the delivery key (provider, event id) dedupes.
	BusinessKey []string `yaml:"business_key"`
	// Concurrency is how many attempts to this route one worker runs at
	// once: the worker's call tokens for the route (its River queue has
	// four slots per token; deliver.Queues). It holds per worker process,
	// so N workers run up to N times as many. Default worker.concurrency.
	Concurrency int `yaml:"concurrency"`

	// Filter is an optional jq program over the provider's JSON body and
	// $event, evaluated at ingest after verification: the route matches an
	// event only when it yields true. An error or any other value is no match.
	Filter string `yaml:"filter"`
	// Method is the HTTP method of each attempt: POST, PUT or PATCH. Default POST.
	Method string `yaml:"method"`
	// Headers are static headers added to every attempt.
	Headers map[string]string `yaml:"headers"`
	// SecretHeaders maps a header to the environment variable holding its
	// whole value (e.g. Authorization: SHIPPER_AUTHORIZATION), read at start
	// and never logged or printed.
	SecretHeaders map[string]string `yaml:"secret_headers"`
	// IdempotencyHeader is the header that carries the delivery's
	// idempotency key. Default Idempotency-Key.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// Body is an optional jq program over the provider's JSON body and
	// $event whose one value is sent as JSON instead of the raw body.
	// Empty sends the provider's bytes unchanged.
	Body string `yaml:"body"`
	// Result is an optional jq program over the downstream's JSON answer
	// to a 2xx; its first value (at most 1 KiB of JSON) is stored on the delivery.
	Result string `yaml:"result"`
	// Success is an optional jq program over {status, headers, body} of a
	// 2xx answer: the attempt delivered only when it yields true. Anything
	// else (false, null, an error) is retried like a 5xx. Empty: every 2xx
	// delivers.
	Success string `yaml:"success"`
	// Breaker is the route's circuit breaker; on by default (see Breaker).
	Breaker Breaker `yaml:"breaker"`
	// After optionally names routes of the same provider that must complete
	// before this one runs: its delivery waits, with no job, until the
	// deliveries of all of them for the same event have completed. The
	// route matches an event only when each route it names matches it too.
	After []string `yaml:"after"`
	// Path is an optional jq program over the provider's JSON body, $event
	// and $results yielding a string or a list of strings: path segments,
	// each percent-escaped, appended to URL. The scheme and host are URL's.
	Path string `yaml:"path"`
	// TLS configures https connections to URL; empty uses the system roots
	// and no client certificate. Verification is never switched off.
	TLS TLS `yaml:"tls"`
}

// TLS is a route's trust and client identity for https.
type TLS struct {
	// CAFile is a PEM bundle trusted instead of the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// downstreams that require mutual TLS. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Set reports whether any TLS key is given.
func (t TLS) Set() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// DefaultIdempotencyHeader is the header that carries a delivery's key
// unless its route names another.
const DefaultIdempotencyHeader = "Idempotency-Key"

// Backoff is an exponential backoff with jitter between Initial and Max.
type Backoff struct {
	// Initial is the first delay. Default 1s.
	Initial Duration `yaml:"initial"`
	// Max caps every delay, including one asked for by Retry-After. Default 1h.
	Max Duration `yaml:"max"`
}

// Duration is a time.Duration written in YAML as Go duration text ("10s", "2160h").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses Go duration text.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 10s or 5m", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (use e.g. 10s, 5m, 2160h)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as Go duration text.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Path returns the config file to read: the --config flag, else
// HOOKGATE_CONFIG, else DefaultPath.
func Path(flag string, getenv func(string) string) string {
	return cmp.Or(flag, getenv("HOOKGATE_CONFIG"), DefaultPath)
}

// Load reads, decodes, defaults and validates the file at path. It does not
// read secrets; see ResolveSecrets.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config file %s does not exist (set --config or HOOKGATE_CONFIG)", path)
		}
		return nil, fmt.Errorf("reading config file %s: %w", path, err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly (an unknown key is an error), applies defaults
// and validates.
func Parse(b []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("is empty")
		}
		return nil, cleanYAMLError(err)
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) setDefaults() {
	c.Ingest.Listen = cmp.Or(c.Ingest.Listen, ":8080")
	c.Ingest.MaxBodyBytes = cmp.Or(c.Ingest.MaxBodyBytes, 1<<20)
	c.Ingest.ClaimTimeout = cmp.Or(c.Ingest.ClaimTimeout, Duration(5*time.Second))
	c.Ingest.MaxInFlight = cmp.Or(c.Ingest.MaxInFlight, 256)
	c.Worker.Listen = cmp.Or(c.Worker.Listen, ":9091")
	c.Worker.Concurrency = cmp.Or(c.Worker.Concurrency, 100)
	c.Worker.RescueAfter = cmp.Or(c.Worker.RescueAfter, Duration(10*time.Minute))
	c.Worker.ShutdownTimeout = cmp.Or(c.Worker.ShutdownTimeout, Duration(30*time.Second))
	c.Worker.ReconcileInterval = cmp.Or(c.Worker.ReconcileInterval, Duration(time.Minute))
	c.Retention.Claims = cmp.Or(c.Retention.Claims, Duration(90*24*time.Hour))
	c.Retention.Payloads = cmp.Or(c.Retention.Payloads, Duration(7*24*time.Hour))
	c.Retention.Interval = cmp.Or(c.Retention.Interval, Duration(time.Hour))
	c.Retention.BatchSize = cmp.Or(c.Retention.BatchSize, 1000)
	for i := range c.Providers {
		p := &c.Providers[i]
		p.Tolerance = cmp.Or(p.Tolerance, Duration(5*time.Minute))
		p.OnFailedRedelivery = cmp.Or(p.OnFailedRedelivery, RedeliveryReopen)
		p.ReplayGuard = cmp.Or(p.ReplayGuard, p.defaultReplayGuard())
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		r.Timeout = cmp.Or(r.Timeout, Duration(10*time.Second))
		r.MaxAttempts = cmp.Or(r.MaxAttempts, 10)
		r.Backoff.Initial = cmp.Or(r.Backoff.Initial, Duration(time.Second))
		r.Backoff.Max = cmp.Or(r.Backoff.Max, Duration(time.Hour))
		r.Method = cmp.Or(r.Method, http.MethodPost)
		r.IdempotencyHeader = cmp.Or(r.IdempotencyHeader, DefaultIdempotencyHeader)
		r.Breaker.setDefaults()
	}
	c.defaultConcurrency()
	c.Console.setDefaults()
}

// defaultReplayGuard is body for the schemes whose signature does not cover
// the event id, so that one captured request cannot mint new events.
func (p Provider) defaultReplayGuard() string {
	switch {
	case p.Scheme == SchemeGitHub, p.Scheme == SchemeShopify,
		p.Scheme == SchemeHMAC && strings.HasPrefix(p.IDFrom, "header:") && p.TimestampHeader == "",
		// The public-key schemes sign the timestamp and the body, not the
		// headers: a header id is unsigned, and within the tolerance a
		// captured request could be re-sent under another.
		(p.Scheme == SchemeEd25519 || p.Scheme == SchemeECDSA) && strings.HasPrefix(p.IDFrom, "header:"):
		return ReplayGuardBody
	}
	return ReplayGuardOff
}

// Provider returns the provider named name.
func (c *Config) Provider(name string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Route returns the route named name.
func (c *Config) Route(name string) (Route, bool) {
	for _, r := range c.Routes {
		if r.Name == name {
			return r, true
		}
	}
	return Route{}, false
}

// MaxAttempts returns route's max_attempts, or 0 for a route that is not
// configured (any more): the number a delivery job is enqueued with.
func (c *Config) MaxAttempts(route string) int {
	r, _ := c.Route(route)
	return r.MaxAttempts
}
