package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Exported is one claim as Export yields it.
type Exported struct {
	Record
	Deliveries []Delivery
	// Payload is nil without Export's payloads, or once cleared.
	Payload []byte
}

// Export calls emit for every claim f matches, oldest first (by
// first_seen_at, then provider and event id), with its deliveries by route,
// and with payloads its raw payload (nil once cleared). f's conditions are
// SearchClaims'; f.After and f.Newer are ignored, and f.Limit is how many
// claims one page reads (0: 500). It reads a page at a time by keyset over
// that order, each page one
// statement whose rows are streamed, so memory stays at about one claim
// whatever the table's size, and no long transaction holds back vacuum.
// first_seen_at never changes, so a claim settling or reopening while the
// export runs is never skipped or repeated; one deleted meanwhile may be
// missing, and one accepted meanwhile appears if it sorts after the
// position reached. The index on first_seen_at serves the order. emit must
// not keep the Exported it is given past its return (its slices are reused).
func (s *Store) Export(ctx context.Context, f Search, payloads bool, emit func(*Exported) error) error {
	q := newExportQuery(f, payloads)
	var sc exportScanner
	for first := true; ; first = false {
		args := q.params
		if !first {
			args = q.after(&sc.e.Record)
		}
		n, err := s.exportPage(ctx, q.sql(first), args, &sc, emit)
		if err != nil {
			return err
		}
		if n < q.page {
			return nil
		}
	}
}

// exportQuery is the statement Export reads its pages with: f's
// conditions and their parameters, then, for every page after the first,
// the keyset position the previous page reached.
type exportQuery struct {
	where   []string
	params  []any
	fixed   int    // how many of params are f's; the keyset's follow
	payload string // the payload column, or NULL without payloads
	page    int
}

// newExportQuery turns f into conditions and parameters, as SearchClaims
// does.
func newExportQuery(f Search, payloads bool) *exportQuery {
	q := &exportQuery{page: f.Limit, payload: "NULL::bytea"}
	if q.page <= 0 {
		q.page = 500
	}
	f.After, f.Newer = nil, nil
	q.where = searchWhere(f, &q.params)
	if payloads {
		q.payload = "c.payload"
	}
	q.fixed = len(q.params)
	return q
}

// after is the parameters of the page that follows the claim last.
func (q *exportQuery) after(last *Record) []any {
	return append(q.params[:q.fixed:q.fixed], last.FirstSeenAt, last.Provider, last.EventID)
}

// sql is the statement of the first page, or of any later one.
func (q *exportQuery) sql(first bool) string {
	w := q.where
	if !first {
		// The keyset condition is spelled out rather than as a row comparison,
		// so that its first half is an index condition on first_seen_at.
		keyset := fmt.Sprintf(`c.first_seen_at >= $%[1]d
  AND (c.first_seen_at > $%[1]d OR (c.provider, c.event_id) > ($%[2]d, $%[3]d))`, q.fixed+1, q.fixed+2, q.fixed+3)
		w = append(append([]string(nil), q.where...), keyset)
	}
	cond := "true"
	if len(w) > 0 {
		cond = strings.Join(w, "\n  AND ")
	}
	// Unqualified columns are the claim's: deliveries appear only in
	// the subquery, each built in DeliveryView's JSON shape (the keys
	// that view computes, max_attempts and idempotency_key, aside).
	return `SELECT ` + claimColumns + `, ` + q.payload + `,
    (SELECT coalesce(json_agg(json_build_object(
                'route', d.route, 'status', d.status, 'attempt_count', d.attempt_count,
                'last_error', coalesce(d.last_error, ''), 'updated_at', d.updated_at,
                'completed_at', d.completed_at, 'business_key', coalesce(k.business_key, ''),
                'result', d.result, 'after', d.waits_for,
                'attempts', (SELECT coalesce(json_agg(json_build_object(
                        'attempt', a.attempt, 'started_at', a.started_at, 'duration_ms', a.duration_ms,
                        'status_code', a.status_code, 'error', a.error) ORDER BY a.attempt, a.started_at), '[]')
                    FROM webhook_attempts a
                    WHERE a.provider = d.provider AND a.event_id = d.event_id AND a.route = d.route)
            ) ORDER BY d.route), '[]')
     FROM webhook_deliveries d
     LEFT JOIN webhook_business_keys k USING (provider, event_id, route)
     WHERE d.provider = c.provider AND d.event_id = c.event_id)
FROM webhook_event_claims c
WHERE ` + cond + `
ORDER BY c.first_seen_at, c.provider, c.event_id
LIMIT ` + strconv.Itoa(q.page)
}

// exportPage runs one page's statement and hands each claim to emit; it
// returns how many rows the page had.
func (s *Store) exportPage(ctx context.Context, sql string, args []any, sc *exportScanner, emit func(*Exported) error) (int, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("exporting claims: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		if err := sc.scan(rows); err != nil {
			return n, err
		}
		if err := emit(&sc.e); err != nil {
			return n, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("exporting claims: %w", err)
	}
	return n, nil
}

// exportScanner reads Export's rows into one Exported, reusing its slices
// (and those the deliveries are decoded into) from row to row.
type exportScanner struct {
	e   Exported
	raw []byte
	// ds are the current row's deliveries, as the page query builds them
	// in JSON: in DeliveryView's shape, the one JSON shape of a delivery.
	ds []DeliveryView
}

// scan reads the current row of rows into sc.e.
func (sc *exportScanner) scan(rows pgx.Rows) error {
	e := &sc.e
	e.Payload, sc.raw, sc.ds = e.Payload[:0], sc.raw[:0], sc.ds[:0]
	c := &e.Record
	if err := rows.Scan(&c.Provider, &c.EventID, &c.EventType, &c.ObjectID, &c.Status, &c.AttemptCount,
		&c.LastError, &c.FirstSeenAt, &c.UpdatedAt, &c.CompletedAt, &c.TerminalAt, &c.Source, &e.Payload, &sc.raw); err != nil {
		return fmt.Errorf("exporting claims: %w", err)
	}
	if err := json.Unmarshal(sc.raw, &sc.ds); err != nil {
		return fmt.Errorf("exporting claims: reading deliveries of %s/%s: %w", c.Provider, c.EventID, err)
	}
	e.Deliveries = e.Deliveries[:0]
	for i := range sc.ds {
		e.Deliveries = append(e.Deliveries, sc.ds[i].delivery(c))
	}
	return nil
}

// delivery is v, as the export's query built it, as a Delivery of the
// claim c.
func (v *DeliveryView) delivery(c *Record) Delivery {
	var result []byte
	if string(v.Result) != "null" {
		result = v.Result
	}
	var attempts []AttemptRecord
	if v.Attempts != nil {
		attempts = *v.Attempts
	}
	return Delivery{
		Provider: c.Provider, EventID: c.EventID, Route: v.Route, Status: v.Status,
		AttemptCount: v.AttemptCount, LastError: v.LastError, UpdatedAt: v.UpdatedAt,
		CompletedAt: v.CompletedAt, EventType: c.EventType, BusinessKey: v.BusinessKey,
		Result: result, After: slices.Clone(v.After), Attempts: attempts,
	}
}
