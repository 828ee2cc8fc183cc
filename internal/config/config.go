// Package config loads and validates hookgate's YAML configuration, the one place
// where defaults and their meaning are written down.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
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
	// Cells lists the Postgres databases the providers are spread over, in
	// order; empty means one cell, DefaultCell, at DATABASE_URL. See CellList.
	Cells []Cell `yaml:"cells"`
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
