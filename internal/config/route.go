package config

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
	// Rate optionally paces the route across every worker (see Rate);
	// nil: not paced.
	Rate *Rate `yaml:"rate"`
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
