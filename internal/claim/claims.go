package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Record is one row of webhook_event_claims, without its payload.
type Record struct {
	Provider     string     `json:"provider"`
	EventID      string     `json:"event_id"`
	EventType    string     `json:"event_type"`
	ObjectID     string     `json:"object_id,omitempty"`
	Status       Status     `json:"status"`
	AttemptCount int        `json:"attempt_count"`
	LastError    string     `json:"last_error,omitempty"`
	FirstSeenAt  time.Time  `json:"first_seen_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	CompletedAt  *time.Time `json:"completed_at,omitempty"`
	// TerminalAt is when the claim last became terminal, the moment
	// retention ages it from; nil while it is processing.
	TerminalAt *time.Time `json:"terminal_at,omitempty"`
	// Source is where the claim came from: SourceWebhook, or
	// SourceReconcile for an event reconciliation fetched from the
	// provider's API.
	Source string `json:"source"`
}

// claimColumns are the columns of a Claim, in its fields' order.
const claimColumns = `provider, event_id, event_type, coalesce(object_id, ''), status, attempt_count,
    coalesce(last_error, ''), first_seen_at, updated_at, completed_at, terminal_at, source`

// Get returns one claim and its deliveries (without payload).
func (s *Store) Get(ctx context.Context, provider, eventID string) (Record, []Delivery, error) {
	rows, err := s.db.Query(ctx, `SELECT `+claimColumns+` FROM webhook_event_claims
WHERE provider = $1 AND event_id = $2`, provider, eventID)
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading claim %s/%s: %w", provider, eventID, err)
	}
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Record])
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, nil, fmt.Errorf("claim %s/%s: %w", provider, eventID, ErrNotFound)
	}
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading claim %s/%s: %w", provider, eventID, err)
	}
	// Without the payload, which nothing here shows. The business keys a
	// claim holds are found through their claim index.
	rows, err = s.db.Query(ctx, `SELECT `+deliveryColumns("coalesce(k.business_key, '')", "d.result::text", "NULL::text", "NULL::bytea")+`
FROM webhook_deliveries d
JOIN webhook_event_claims c USING (provider, event_id)
LEFT JOIN webhook_business_keys k USING (provider, event_id, route)
WHERE d.provider = $1 AND d.event_id = $2 ORDER BY d.route`, provider, eventID)
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading deliveries of %s/%s: %w", provider, eventID, err)
	}
	ds, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Delivery])
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading deliveries of %s/%s: %w", provider, eventID, err)
	}
	return c, ds, nil
}

// BacklogCounts is what Store.Backlog measures: the claims still
// processing and the deliveries waiting, for metrics.
type BacklogCounts struct {
	Processing int
	// OldestAge is the age of the oldest processing claim; 0 when none.
	OldestAge time.Duration
	// Waiting counts waiting deliveries by route, for the routes asked
	// about; a route with none is absent.
	Waiting map[string]int
}

// Backlog counts processing claims and the age of the oldest one, using the
// partial index on processing claims, and the waiting deliveries of routes,
// using the partial index on waiting deliveries.
func (s *Store) Backlog(ctx context.Context, routes []string) (BacklogCounts, error) {
	var b BacklogCounts
	var age float64
	err := s.db.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(first_seen_at)), 0)
FROM webhook_event_claims WHERE status = 'processing'`).Scan(&b.Processing, &age)
	if err != nil {
		return BacklogCounts{}, fmt.Errorf("measuring backlog: %w", err)
	}
	b.OldestAge = time.Duration(age * float64(time.Second))
	rows, err := s.db.Query(ctx, `SELECT route, count(*) FROM webhook_deliveries
WHERE status = 'waiting' AND route = ANY($1) GROUP BY route`, routes)
	if err != nil {
		return BacklogCounts{}, fmt.Errorf("counting waiting deliveries: %w", err)
	}
	var route string
	var n int
	b.Waiting = map[string]int{}
	if _, err := pgx.ForEachRow(rows, []any{&route, &n}, func() error {
		b.Waiting[route] = n
		return nil
	}); err != nil {
		return BacklogCounts{}, fmt.Errorf("counting waiting deliveries: %w", err)
	}
	return b, nil
}
