package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Delivery is one (claim, route) pair with what the worker needs to attempt
// it: the claim's normalized fields and raw payload.
type Delivery struct {
	Provider     string
	EventID      string
	Route        string
	Status       DeliveryStatus
	AttemptCount int
	LastError    string
	UpdatedAt    time.Time
	CompletedAt  *time.Time
	// BusinessKeyMissing: the delivery failed at ingest because its route's
	// business key could not be computed; it is never reopened.
	BusinessKeyMissing bool
	// BusinessKey is the business key this delivery holds for its route
	// (the listed values as a JSON array), as Get reads it; empty when it
	// holds none.
	BusinessKey string
	// Result is the JSON the route's result program recorded when the
	// delivery completed; nil when there is none. Read by Get only.
	Result []byte
	// Attempts is the delivery's attempt history, without responses, as
	// Export reads it; nil elsewhere (see Store.Attempts).
	Attempts []AttemptRecord `db:"-"`
	// Results is a JSON object of the recorded results of the routes in
	// After, by route (those with none are absent); nil when there are
	// none. Read by LoadDeliveries only, for the route's $results.
	Results []byte
	// After names the routes whose deliveries of the claim must complete
	// before this one runs (recorded when the event was claimed); empty
	// for a delivery that waits for nothing.
	After []string

	// AttemptBase is how many Hookgate-Attempt numbers the delivery's
	// earlier jobs used: attempt n of its current job is number
	// AttemptBase + n.
	AttemptBase int

	EventType   string
	ObjectID    string
	ContentType string
	// ContentEncoding is the provider's Content-Encoding, "" for none.
	ContentEncoding string
	// Payload is nil once retention has cleared it.
	Payload []byte
	// ClaimFirstSeen is when ingest first accepted the event.
	ClaimFirstSeen time.Time
}

// Key returns the key of d.
func (d *Delivery) Key() Key { return Key{Provider: d.Provider, EventID: d.EventID, Route: d.Route} }

// deliveryColumns returns the columns of a Delivery, in its fields' order,
// over webhook_deliveries d joined to webhook_event_claims c; businessKey,
// result, results and payload are what to read as its BusinessKey, Result,
// Results and Payload.
func deliveryColumns(businessKey, result, results, payload string) string {
	return `d.provider, d.event_id, d.route, d.status, d.attempt_count, coalesce(d.last_error, ''),
    d.updated_at, d.completed_at, d.business_key_missing, ` + businessKey + `, ` + result + `, ` + results + `, d.waits_for, d.attempt_base,
    c.event_type, coalesce(c.object_id, ''), c.content_type, c.content_encoding, ` + payload + `, c.first_seen_at`
}

// predecessorResultsSQL is the results of the routes a delivery (aliased
// d) runs after, as a JSON object by route, each found by its primary key;
// NULL when none is recorded.
const predecessorResultsSQL = `(
    SELECT jsonb_object_agg(p.route, y.result)::text
    FROM unnest(d.waits_for) AS p(route)
    JOIN webhook_deliveries y ON y.provider = d.provider AND y.event_id = d.event_id AND y.route = p.route
    WHERE y.result IS NOT NULL)`

// loadDeliveriesSQL loads the deliveries of arrays of keys, numbered as
// given: one primary-key lookup per key (see lockClaimsSQL on why not a join;
// LIMIT keeps the planner from flattening it back into one).
var loadDeliveriesSQL = `
SELECT k.i, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(provider, event_id, route, i)
CROSS JOIN LATERAL (
    SELECT ` + deliveryColumns("''", "NULL::text", predecessorResultsSQL, "c.payload") + `
    FROM webhook_deliveries d
    JOIN webhook_event_claims c USING (provider, event_id)
    WHERE d.provider = k.provider AND d.event_id = k.event_id AND d.route = k.route
    LIMIT 1) x`

// LoadDeliveries returns the deliveries of keys, each with its claim's
// payload, in one query: ds[i] is the delivery of keys[i], or nil when
// there is none.
func (s *Store) LoadDeliveries(ctx context.Context, keys []Key) (ds []*Delivery, err error) {
	providers, ids, routes := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		providers[i], ids[i], routes[i] = k.Provider, k.EventID, k.Route
	}
	type numbered struct {
		I int
		Delivery
	}
	// On its generic plan (genericPlansSQL): the batch is one implicit
	// transaction, whose end ends the setting.
	var b pgx.Batch
	queueGenericPlans(&b)
	var found []numbered
	b.Queue(loadDeliveriesSQL, providers, ids, routes).Query(func(rows pgx.Rows) (err error) {
		found, err = pgx.CollectRows(rows, pgx.RowToStructByPos[numbered])
		return err
	})
	if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("loading %d deliveries: %w", len(keys), err)
	}
	ds = make([]*Delivery, len(keys))
	for _, f := range found {
		ds[f.I-1] = &f.Delivery
	}
	return ds, nil
}
