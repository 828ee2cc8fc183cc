package claim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Search is the one filter of claims: it narrows and pages SearchClaims
// (`worker claims list`, the operator API's and the console's lists),
// CountClaims, Export (`worker claims export`) and ReopenMatching (bulk
// retry), whose conditions one builder writes. Zero values match
// everything.
type Search struct {
	Status   Status
	Provider string
	// Route keeps claims with a delivery to this route.
	Route string
	// Type is an event type, or a glob where * matches any run of
	// characters and ? any one.
	Type string
	// EventIDPrefix keeps claims whose event id starts with it.
	EventIDPrefix string
	// EventIDContains keeps claims whose event id holds it anywhere
	// (served by the trigram index of migration 21 from three characters
	// on, see substringSQL).
	EventIDContains string
	// BusinessKey keeps claims holding this business key (as `claims show`
	// prints it, a JSON array of the route's values).
	BusinessKey string
	// Since and Before bound first_seen_at: Since <= first_seen_at < Before.
	Since, Before time.Time
	// ChangedUpTo, when set, keeps claims whose last change (updated_at)
	// is at or before it: a bulk retry's bound, the time of the dry run it
	// was confirmed on, so that claims that failed since are left alone.
	ChangedUpTo time.Time
	// After, when set, keeps only claims after it in the order (newest
	// first): the position a previous page ended at.
	After *Position
	// Newer, when set (and After not), keeps only claims before it in the
	// order, and SearchClaims returns the Limit of them nearest to it,
	// still newest first: the page before the one that began at Newer.
	Newer *Position
	// Limit caps the rows returned; 0 means 50.
	Limit int
}

// Position is a claim's place in the newest-first order of SearchClaims:
// first_seen_at, then provider and event id, descending. first_seen_at
// never changes, so a position stays valid while claims settle, reopen or
// arrive: claims that arrive later sort before every position already
// handed out, and a page after a position neither repeats nor skips one.
type Position struct {
	FirstSeenAt time.Time
	Provider    string
	EventID     string
}

// Position returns c's place in the order.
func (c Record) Position() Position {
	return Position{FirstSeenAt: c.FirstSeenAt, Provider: c.Provider, EventID: c.EventID}
}

// likeEscape escapes s for a LIKE pattern with \ as its escape character.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// trigramMin is the shortest substring the trigram index can narrow: a
// shorter one holds no trigram, and the index would be read whole.
const trigramMin = 3

// substringSQL is what a substring filter of sub matches against. From
// trigramMin characters on it is the expression migration 21 indexes with
// pg_trgm (event_id joined to the empty string), which only this filter
// names: no join or lookup by id can use that index, so they keep to the
// primary key. A shorter substring matches against the bare column, which
// that index does not cover, so the list walks its newest-first index and
// tests each id, stopping once the page is full, as it does for other
// filters no index narrows.
func substringSQL(sub string) string {
	if utf8.RuneCountInString(sub) >= trigramMin {
		return "(c.event_id || '')"
	}
	return "c.event_id"
}

// statusLiterals are the claim statuses as SQL literals.
var statusLiterals = map[Status]string{
	Processing: "'processing'", Completed: "'completed'", Failed: "'failed'", Ignored: "'ignored'",
}

// searchWhere returns the conditions f sets over webhook_event_claims c,
// with their parameters appended to params; limit and order excluded.
func searchWhere(f Search, params *[]any) []string {
	arg := func(v any) string {
		*params = append(*params, v)
		return "$" + strconv.Itoa(len(*params))
	}
	var where []string
	if f.Status != "" {
		// A known status is written as a literal, not a parameter: the
		// claim table's status indexes are partial (migration 15), and a
		// generic plan of "status = $1" could use none of them.
		if lit, ok := statusLiterals[f.Status]; ok {
			where = append(where, "c.status = "+lit)
		} else {
			where = append(where, "c.status = "+arg(string(f.Status)))
		}
	}
	if f.Provider != "" {
		where = append(where, "c.provider = "+arg(f.Provider))
	}
	if f.Type != "" {
		if strings.ContainsAny(f.Type, "*?") {
			glob := strings.NewReplacer("*", "%", "?", "_").Replace(likeEscape(f.Type))
			where = append(where, "c.event_type LIKE "+arg(glob))
		} else {
			where = append(where, "c.event_type = "+arg(f.Type))
		}
	}
	if f.EventIDPrefix != "" {
		where = append(where, "c.event_id LIKE "+arg(likeEscape(f.EventIDPrefix)+"%"))
	}
	if f.EventIDContains != "" {
		where = append(where, substringSQL(f.EventIDContains)+" LIKE "+arg("%"+likeEscape(f.EventIDContains)+"%"))
	}
	if f.Route != "" {
		// One primary-key probe per claim read.
		where = append(where, `EXISTS (SELECT 1 FROM webhook_deliveries d
    WHERE d.provider = c.provider AND d.event_id = c.event_id AND d.route = `+arg(f.Route)+`)`)
	}
	if f.BusinessKey != "" {
		// Through the key's hash, as ingest stores it and its index serves.
		hash := sha256.Sum256([]byte(f.BusinessKey))
		where = append(where, `EXISTS (SELECT 1 FROM webhook_business_keys k
    WHERE k.provider = c.provider AND k.event_id = c.event_id AND k.key_hash = `+arg(hash[:])+`)`)
	}
	if !f.Since.IsZero() {
		where = append(where, "c.first_seen_at >= "+arg(f.Since))
	}
	if !f.Before.IsZero() {
		where = append(where, "c.first_seen_at < "+arg(f.Before))
	}
	if !f.ChangedUpTo.IsZero() {
		where = append(where, "c.updated_at <= "+arg(f.ChangedUpTo))
	}
	if f.After != nil {
		// The first condition bounds the index range; the row comparison
		// breaks ties within one timestamp.
		t := arg(f.After.FirstSeenAt)
		where = append(where, "c.first_seen_at <= "+t,
			"(c.first_seen_at, c.provider, c.event_id) < ("+t+", "+arg(f.After.Provider)+", "+arg(f.After.EventID)+")")
	} else if f.Newer != nil {
		t := arg(f.Newer.FirstSeenAt)
		where = append(where, "c.first_seen_at >= "+t,
			"(c.first_seen_at, c.provider, c.event_id) > ("+t+", "+arg(f.Newer.Provider)+", "+arg(f.Newer.EventID)+")")
	}
	return where
}

// searchSQL is the page query of SearchClaims.
func searchSQL(f Search) (string, []any) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	var params []any
	where := searchWhere(f, &params)
	sql := `SELECT ` + claimColumnsOf("c") + ` FROM webhook_event_claims c`
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, "\n  AND ")
	}
	params = append(params, limit)
	order := "DESC"
	if f.After == nil && f.Newer != nil {
		order = "ASC" // the nearest claims newer than Newer; reversed by SearchClaims
	}
	sql += "\nORDER BY c.first_seen_at " + order + ", c.provider " + order + ", c.event_id " + order +
		"\nLIMIT $" + strconv.Itoa(len(params))
	return sql, params
}

// claimColumnsOf is claimColumns over the alias a.
func claimColumnsOf(a string) string {
	return a + `.provider, ` + a + `.event_id, ` + a + `.event_type, coalesce(` + a + `.object_id, ''), ` + a + `.status, ` +
		a + `.attempt_count, coalesce(` + a + `.last_error, ''), ` + a + `.first_seen_at, ` + a + `.updated_at, ` +
		a + `.completed_at, ` + a + `.terminal_at, ` + a + `.source`
}

// SearchClaims returns one page of the claims f matches, newest first; the
// next page is the one after the last claim's Position.
func (s *Store) SearchClaims(ctx context.Context, f Search) ([]Record, error) {
	sql, params := searchSQL(f)
	rows, err := s.db.Query(ctx, sql, params...)
	if err != nil {
		return nil, fmt.Errorf("searching claims: %w", err)
	}
	claims, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Record])
	if err != nil {
		return nil, fmt.Errorf("searching claims: %w", err)
	}
	if f.After == nil && f.Newer != nil {
		slices.Reverse(claims)
	}
	return claims, nil
}

// CountClaims counts the claims f matches (After, Newer and Limit aside).
func (s *Store) CountClaims(ctx context.Context, f Search) (int, error) {
	return s.CountClaimsUpTo(ctx, f, 0)
}

// CountClaimsAsOf is CountClaims and the database's time of the count:
// what a bulk retry's dry run answers, and its confirmation carries.
func (s *Store) CountClaimsAsOf(ctx context.Context, f Search) (n int, asOf time.Time, err error) {
	f.After, f.Newer = nil, nil
	var params []any
	where := searchWhere(f, &params)
	sql := `SELECT count(*), now() FROM webhook_event_claims c`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if err := s.db.QueryRow(ctx, sql, params...).Scan(&n, &asOf); err != nil {
		return 0, time.Time{}, fmt.Errorf("counting claims: %w", err)
	}
	return n, asOf, nil
}

// CountClaimsUpTo counts the claims f matches (After, Newer and Limit
// aside), but stops at bound when bound > 0: a list's "10,000+" costs at
// most bound index entries however many claims match. n == bound then
// means "bound or more".
func (s *Store) CountClaimsUpTo(ctx context.Context, f Search, bound int) (int, error) {
	f.After, f.Newer = nil, nil
	var params []any
	where := searchWhere(f, &params)
	sql := `SELECT 1 FROM webhook_event_claims c`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if bound > 0 {
		params = append(params, bound)
		sql += " LIMIT $" + strconv.Itoa(len(params))
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM (`+sql+`) m`, params...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting claims: %w", err)
	}
	return n, nil
}

// DeliveriesOf returns the deliveries of claims by claim, each claim's by
// route, in one query.
func (s *Store) DeliveriesOf(ctx context.Context, keys []EventKey) (map[EventKey][]Delivery, error) {
	providers, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		providers[i], ids[i] = k.Provider, k.EventID
	}
	rows, err := s.db.Query(ctx, `SELECT `+deliveryColumns("coalesce(bk.business_key, '')", "d.result::text", "NULL::text", "NULL::bytea")+`
FROM unnest($1::text[], $2::text[]) AS k(provider, event_id)
JOIN webhook_deliveries d ON d.provider = k.provider AND d.event_id = k.event_id
JOIN webhook_event_claims c ON c.provider = d.provider AND c.event_id = d.event_id
LEFT JOIN webhook_business_keys bk ON bk.provider = d.provider AND bk.event_id = d.event_id AND bk.route = d.route
ORDER BY d.provider, d.event_id, d.route`, providers, ids)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries of %d claims: %w", len(keys), err)
	}
	ds, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Delivery])
	if err != nil {
		return nil, fmt.Errorf("reading deliveries of %d claims: %w", len(keys), err)
	}
	out := make(map[EventKey][]Delivery, len(keys))
	for _, d := range ds {
		k := EventKey{Provider: d.Provider, EventID: d.EventID}
		out[k] = append(out[k], d)
	}
	return out, nil
}

// Payload returns a claim's raw body and its content encoding; a nil body
// once retention cleared it.
func (s *Store) Payload(ctx context.Context, provider, eventID string) (body []byte, contentEncoding string, err error) {
	err = s.db.QueryRow(ctx, `SELECT payload, content_encoding FROM webhook_event_claims
WHERE provider = $1 AND event_id = $2`, provider, eventID).Scan(&body, &contentEncoding)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", fmt.Errorf("claim %s/%s: %w", provider, eventID, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading payload of %s/%s: %w", provider, eventID, err)
	}
	return body, contentEncoding, nil
}
