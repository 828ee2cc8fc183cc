package claim

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// releaseSQL releases the waiting deliveries of the claims in the arrays
// whose predecessors (waits_for) have all completed: they become
// processing, and the caller inserts their jobs in the same transaction.
// The caller holds the claims' locks, so no other transaction changes
// their deliveries meanwhile; as a later statement of that transaction it
// sees the completions recorded before it. Each claim's deliveries are read
// through the primary key's prefix (OFFSET 0 keeps Postgres from
// flattening the lookup into a join over the table; see lockClaimsSQL).
const releaseSQL = `
UPDATE webhook_deliveries d SET status = 'processing', updated_at = now()
FROM (
    SELECT x.tid
    FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS c(provider, event_id)) c
    CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.status, w.waits_for FROM webhook_deliveries w
        WHERE w.provider = c.provider AND w.event_id = c.event_id
        OFFSET 0) x
    WHERE x.status = 'waiting'
      AND NOT EXISTS (
          SELECT 1 FROM unnest(x.waits_for) AS p(route)
          WHERE NOT EXISTS (
              SELECT 1 FROM webhook_deliveries y
              WHERE y.provider = c.provider AND y.event_id = c.event_id AND y.route = p.route
                AND y.status = 'completed'))) v
WHERE d.ctid = v.tid
RETURNING d.provider, d.event_id, d.route`

// queueRelease queues releaseSQL for the claims of attempts; the returned
// keys are the deliveries released, once the batch has run.
func queueRelease(b *pgx.Batch, attempts []Attempt) *[]Key {
	providers, ids := make([]string, len(attempts)), make([]string, len(attempts))
	for i, a := range attempts {
		providers[i], ids[i] = a.Key.Provider, a.Key.EventID
	}
	released := new([]Key)
	b.Queue(releaseSQL, providers, ids).Query(func(rows pgx.Rows) error {
		keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
		if err != nil {
			return fmt.Errorf("releasing waiting deliveries: %w", err)
		}
		*released = keys
		return nil
	})
	return released
}
