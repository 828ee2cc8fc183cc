package config

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// nameRE is what provider and route names may be: they appear in URLs, metric
// labels and downstream keys.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// envRE is a portable environment variable name.
var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxRetentionBatch bounds retention.batch_size: a batch is one statement
// holding that many row locks, and the point of batching is to keep it short.
const maxRetentionBatch = 100000

// Validate checks the whole configuration and reports every problem found,
// one per line, each naming the key path.
func (c *Config) Validate() error {
	var v validator
	c.validateSettings(&v)
	providers := c.validateProviders(&v)
	routes := map[string]bool{}
	for i, r := range c.Routes {
		c.validateRoute(&v, fmt.Sprintf("routes[%d]", i), r, providers, routes)
	}
	c.validateConcurrency(&v)
	c.validateAfter(&v)
	v.console(c.Console)
	c.validateCells(&v)
	return v.err()
}

// validateSettings checks the ingest, worker and retention settings.
func (c *Config) validateSettings(v *validator) {
	if c.Ingest.MaxBodyBytes < 1 {
		v.add("ingest.max_body_bytes", "must be at least 1, got %d", c.Ingest.MaxBodyBytes)
	}
	v.positive("ingest.claim_timeout", c.Ingest.ClaimTimeout)
	if c.Ingest.MaxInFlight < 1 {
		v.add("ingest.max_in_flight", "must be at least 1, got %d", c.Ingest.MaxInFlight)
	}
	if c.Worker.Concurrency < 1 {
		v.add("worker.concurrency", "must be at least 1, got %d", c.Worker.Concurrency)
	}
	v.positive("worker.rescue_after", c.Worker.RescueAfter)
	v.positive("worker.shutdown_timeout", c.Worker.ShutdownTimeout)
	v.positive("worker.reconcile_interval", c.Worker.ReconcileInterval)
	for i, p := range c.Worker.TrustedProxies {
		if _, ok := parseProxy(p); !ok {
			v.add(fmt.Sprintf("worker.trusted_proxies[%d]", i), "%q must be an IP address or a CIDR range such as 10.0.0.0/8", p)
		}
	}
	v.positive("retention.claims", c.Retention.Claims)
	v.positive("retention.payloads", c.Retention.Payloads)
	if c.Retention.Payloads > c.Retention.Claims && c.Retention.Claims > 0 {
		v.add("retention.payloads", "%s is longer than retention.claims (%s): a payload cannot outlive its claim",
			c.Retention.Payloads.D(), c.Retention.Claims.D())
	}
	v.positive("retention.interval", c.Retention.Interval)
	if c.Retention.Audit < 0 {
		v.positive("retention.audit", c.Retention.Audit)
	}
	if c.Retention.BatchSize < 1 || c.Retention.BatchSize > maxRetentionBatch {
		v.add("retention.batch_size", "must be between 1 and %d, got %d", maxRetentionBatch, c.Retention.BatchSize)
	}
}

// validateRoute checks route r at key; providers names the configured
// providers, and routes the names of the routes checked before it, to
// which r's is added.
func (c *Config) validateRoute(v *validator, key string, r Route, providers, routes map[string]bool) {
	switch {
	case r.Name == "":
		v.add(key+".name", "is required")
	case !nameRE.MatchString(r.Name):
		v.add(key+".name", "%q must be lower-case letters, digits, - or _ (at most 63), starting with a letter or digit", r.Name)
	case routes[r.Name]:
		v.add(key+".name", "%q is used by another route", r.Name)
	}
	routes[r.Name] = true
	switch {
	case r.Provider == "":
		v.add(key+".provider", "is required")
	case !providers[r.Provider]:
		v.add(key+".provider", "%q is not a configured provider", r.Provider)
	}
	if len(r.Events) == 0 {
		v.add(key+".events", "at least one event type or pattern is required")
	}
	for j, e := range r.Events {
		if err := validPattern(e); err != nil {
			v.add(fmt.Sprintf("%s.events[%d]", key, j), "%q %v", e, err)
		}
	}
	v.url(key+".url", r.URL)
	v.positive(key+".timeout", r.Timeout)
	if end := c.Worker.EndBound(); r.Timeout > 0 && c.Worker.RescueAfter > 0 && r.Timeout.D()+end >= c.Worker.RescueAfter.D() {
		v.add(key+".timeout", "%s must be shorter than worker.rescue_after (%s) less the %s a run may take past its call, or a live run would be rescued while it runs",
			r.Timeout.D(), c.Worker.RescueAfter.D(), end)
	}
	if r.MaxAttempts < 1 {
		v.add(key+".max_attempts", "must be at least 1, got %d", r.MaxAttempts)
	}
	v.positive(key+".backoff.initial", r.Backoff.Initial)
	v.positive(key+".backoff.max", r.Backoff.Max)
	if r.Backoff.Initial > r.Backoff.Max {
		v.add(key+".backoff.initial", "%s is longer than backoff.max (%s)", r.Backoff.Initial.D(), r.Backoff.Max.D())
	}
	v.retryStatuses(key+".retry_statuses", r.RetryStatuses)
	v.breaker(key+".breaker", r.Breaker)
	v.rate(key+".rate", r.Rate)
	if r.SigningSecretEnv != "" && !envRE.MatchString(r.SigningSecretEnv) {
		v.add(key+".signing_secret_env", "%q is not an environment variable name", r.SigningSecretEnv)
	}
	switch {
	case r.SigningSecretFile != "" && r.SigningSecretEnv != "":
		v.add(key+".signing_secret_file", "is set beside signing_secret_env: name the secret once")
	case r.SigningSecretFile != "":
		v.filePath(key+".signing_secret_file", r.SigningSecretFile)
	}
	v.validBusinessKey(key+".business_key", r.BusinessKey)
	v.request(key, r)
}

// validateAfter checks each route's after: the routes named exist, belong
// to the same provider, are named once and form no cycle. Errors name the
// routes involved.
func (c *Config) validateAfter(v *validator) {
	index := map[string]int{}
	for i, r := range c.Routes {
		if _, dup := index[r.Name]; !dup {
			index[r.Name] = i
		}
	}
	for i, r := range c.Routes {
		for j, name := range r.After {
			key := fmt.Sprintf("routes[%d].after[%d]", i, j)
			k, ok := index[name]
			switch {
			case !ok:
				v.add(key, "route %q runs after %q, which is not a configured route", r.Name, name)
			case name == r.Name:
				v.add(key, "route %q cannot run after itself", r.Name)
			case c.Routes[k].Provider != r.Provider:
				v.add(key, "route %q (provider %q) cannot run after %q, a route of provider %q: both must take the same events",
					r.Name, r.Provider, name, c.Routes[k].Provider)
			case slices.Contains(r.After[:j], name):
				v.add(key, "route %q names %q twice", r.Name, name)
			}
		}
	}
	// A depth-first walk over after; a route met again on the current path
	// closes a cycle, reported once with the routes on it.
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(c.Routes))
	var path []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for _, name := range c.Routes[i].After {
			k, ok := index[name]
			if !ok || k == i {
				continue
			}
			switch state[k] {
			case unseen:
				visit(k)
			case onPath:
				start := slices.Index(path, k)
				names := make([]string, 0, len(path)-start+1)
				for _, p := range path[start:] {
					names = append(names, strconv.Quote(c.Routes[p].Name))
				}
				names = append(names, strconv.Quote(c.Routes[k].Name))
				v.add(fmt.Sprintf("routes[%d].after", i), "routes form a cycle: %s (each runs after the next)",
					strings.Join(names, " -> "))
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range c.Routes {
		if state[i] == unseen {
			visit(i)
		}
	}
}

// retryStatuses checks a route's retry_statuses: 4xx codes, each once.
// Other classes are not the key's to change: a 2xx is delivered, a 5xx
// retried already, and a 3xx is a redirect, never followed.
func (v *validator) retryStatuses(key string, codes []int) {
	seen := map[int]bool{}
	for i, code := range codes {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case code < 400 || code > 499:
			v.add(k, "%d is not a 4xx status: retry_statuses lists codes from 400 to 499", code)
		case seen[code]:
			v.add(k, "%d is listed twice", code)
		}
		seen[code] = true
	}
}

// methods are the HTTP methods a route may send: each carries a body.
var methods = []string{http.MethodPost, http.MethodPut, http.MethodPatch}

// tokenRE is an HTTP header name (RFC 9110 token).
var tokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are set by hookgate or by HTTP itself; a route's headers
// may not replace them (compared canonically; Hookgate-* is reserved too).
var reservedHeaders = []string{
	"Host", "Content-Length", "Content-Type", "Content-Encoding", "Transfer-Encoding", "Connection",
	"Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade", "User-Agent",
	"Idempotency-Key", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Traceparent", "Tracestate",
}

func reserved(name string) bool {
	c := http.CanonicalHeaderKey(name)
	return slices.Contains(reservedHeaders, c) || strings.HasPrefix(c, "Hookgate-")
}

// request checks how a route shapes its requests: method, headers, the
// idempotency header, its jq programs and TLS files.
func (v *validator) request(key string, r Route) {
	if !slices.Contains(methods, r.Method) {
		v.add(key+".method", "%q is not a supported method (one of %s)", r.Method, strings.Join(methods, ", "))
	}
	idem := http.CanonicalHeaderKey(r.IdempotencyHeader)
	switch {
	case !tokenRE.MatchString(r.IdempotencyHeader):
		v.add(key+".idempotency_header", "%q is not a valid header name", r.IdempotencyHeader)
	case idem != DefaultIdempotencyHeader && reserved(idem):
		v.add(key+".idempotency_header", "%q is a header hookgate or HTTP sets itself", r.IdempotencyHeader)
	}
	header := func(field, name string) {
		k := key + "." + field + "." + name
		switch {
		case !tokenRE.MatchString(name):
			v.add(k, "%q is not a valid header name", name)
		case reserved(name) || http.CanonicalHeaderKey(name) == idem:
			v.add(k, "is a header hookgate or HTTP sets itself")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		header("headers", name)
		if strings.ContainsFunc(r.Headers[name], func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
			v.add(key+".headers."+name, "the value holds a control character")
		}
	}
	canon := map[string]bool{}
	for name := range r.Headers {
		canon[http.CanonicalHeaderKey(name)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(r.SecretHeaders)) {
		header("secret_headers", name)
		if canon[http.CanonicalHeaderKey(name)] {
			v.add(key+".secret_headers."+name, "is also in headers")
		}
		if env := r.SecretHeaders[name]; !envRE.MatchString(env) {
			v.add(key+".secret_headers."+name, "%q is not an environment variable name", env)
		}
	}
	if r.TLS.Set() {
		if u, err := url.Parse(r.URL); err == nil && u.Scheme != "https" {
			v.add(key+".tls", "applies only to https URLs")
		}
	}
	if (r.TLS.CertFile == "") != (r.TLS.KeyFile == "") {
		v.add(key+".tls", "cert_file and key_file go together: give both or neither")
	}
}

func validPattern(p string) error {
	if p == "" {
		return errors.New("is empty")
	}
	for _, r := range p {
		if r <= ' ' || r > '~' {
			return errors.New("must be printable ASCII without spaces")
		}
	}
	if _, err := path.Match(p, ""); err != nil {
		return errors.New("is not a valid glob")
	}
	return nil
}

// Matches reports whether eventType is one of the route's event types or
// matches one of its globs.
func (r Route) Matches(eventType string) bool {
	for _, p := range r.Events {
		if p == "*" || p == eventType {
			return true
		}
		if ok, _ := path.Match(p, eventType); ok {
			return true
		}
	}
	return false
}

type validator struct{ problems []string }

func (v *validator) add(key, format string, args ...any) {
	v.problems = append(v.problems, key+": "+fmt.Sprintf(format, args...))
}

func (v *validator) positive(key string, d Duration) {
	if d <= 0 {
		v.add(key, "must be a positive duration, got %s", time.Duration(d))
	}
}

func (v *validator) url(key, raw string) {
	if raw == "" {
		v.add(key, "is required")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		v.add(key, "is not a valid URL")
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		// Redacted: a password in the URL must not reach a log.
		v.add(key, "%q must be an absolute http or https URL", u.Redacted())
		return
	}
	if u.User != nil {
		v.add(key, "must not carry credentials; use signing_secret_env to authenticate forwarded events")
	}
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(v.problems, "\n"))
}

// cleanYAMLError turns the decoder's messages into ones that name the key.
func cleanYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			// "line 5: field bogus not found in type config.Provider"
			if i := strings.Index(m, "field "); i >= 0 && strings.Contains(m, " not found in type config.") {
				field, typ, _ := strings.Cut(m[i+len("field "):], " not found in type config.")
				m = fmt.Sprintf("%sunknown key %q (in %s)", m[:i], field, strings.ToLower(typ))
			}
			msgs = append(msgs, m)
		}
		return errors.New(strings.Join(msgs, "\n"))
	}
	return err
}

// filePath checks that path can name a file; whether it can be read is
// checked where it is read, at start.
func (v *validator) filePath(key, path string) {
	if path == "" || strings.ContainsRune(path, 0) {
		v.add(key, "%q is not a file path", path)
	}
}
