package claim

// Event is a verified, normalized webhook as ingest hands it over.
type Event struct {
	Provider    string
	ID          string
	Type        string
	ObjectID    string
	ContentType string
	// ContentEncoding is the request's Content-Encoding when not identity:
	// the payload's bytes are encoded that way and forwarded so.
	ContentEncoding string
	Payload         []byte // raw bytes, exactly as received
	// GuardBody turns on the replay guard for this event: the claim records
	// a hash of Payload, and a payload byte-identical to that of another
	// claim of the provider is a Replay (see ReplayGuard in config).
	GuardBody bool
	// BusinessKeys holds the event's business key for each route it
	// matches that has one (see BusinessKey); routes without one are absent.
	BusinessKeys []BusinessKey
	// After holds, for each route it matches that runs after others, the
	// names of those routes (its predecessors): the route's delivery waits
	// until theirs have completed. Predecessors the event does not match
	// are not waited for; routes without any are absent.
	After map[string][]string
	// JobMetadata, when set, is the JSON metadata of the jobs this event
	// enqueues: the accepting request's trace context, so that each
	// delivery attempt continues its trace.
	JobMetadata []byte
	// Source is recorded on the claim when this copy wins it: "" or
	// SourceWebhook for a webhook, SourceReconcile for an event fetched
	// from the provider's API. A duplicate changes nothing.
	Source string
}

// Where a claim came from (Event.Source, Record.Source).
const (
	SourceWebhook   = "webhook"
	SourceReconcile = "reconcile"
)

// BusinessKey is an event's business key for one route, computed at ingest
// from the verified event. Exactly one of Key and Missing is set.
type BusinessKey struct {
	Route string
	// Key is the route's listed values, encoded so that distinct lists give
	// distinct keys (a JSON array).
	Key string
	// Missing says why the key could not be computed, naming the field; the
	// route's delivery is then failed with it, never sent without its key.
	Missing string
}

// Decision is what Claim decided for one copy of an event.
type Decision int

const (
	// Claimed: this call won the key; its deliveries and jobs are committed.
	// When business keys left none of its deliveries to run (Result.Skipped,
	// Result.Unkeyed), its status is already ignored or failed.
	Claimed Decision = iota + 1
	// ClaimedIgnored: this call won the key but no route matched, so the
	// claim is recorded as ignored with no delivery.
	ClaimedIgnored
	// Duplicate: the key was already claimed; nothing changed.
	Duplicate
	// Reopened: the key was claimed and had failed; its failed deliveries
	// are processing again with a new job each.
	Reopened
	// Replay: the key is new but the body is byte-identical to that of
	// another claim of the provider (GuardBody); nothing changed.
	Replay
)

// Result describes a Claim call.
type Result struct {
	Decision Decision
	// Status is the claim's status after the call.
	Status Status
	// Deliveries is how many deliveries this call enqueued.
	Deliveries int
	// Skipped are the routes whose delivery this call skipped because
	// another claim holds its business key; nil when none.
	Skipped []string
	// Unkeyed are the routes whose delivery this call failed because its
	// business key could not be computed; nil when none.
	Unkeyed []string
}

// Duplicate reports whether the caller should answer "duplicate": true.
func (r Result) Duplicate() bool { return r.Decision == Duplicate || r.Decision == Replay }

// Request is one event to claim: the event and the names of the routes its
// type matches.
type Request struct {
	Event  Event
	Routes []string
}
