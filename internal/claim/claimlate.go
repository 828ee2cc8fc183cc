package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// What the claim statement (claimManySQL) could not see: keys and business
// keys another transaction committed while the statement waited on them,
// read by a statement more, only when a batch met them.

// lateSQL reads what claimManySQL could not see of keys another
// transaction committed while it waited for them (its snapshot predates
// them): the key's claim status, else whether the body's hash is held (a
// replay). A row with neither had its claim deleted meanwhile.
const lateSQL = `
SELECT i.ord, c.status,
       i.body_hash IS NOT NULL AND EXISTS (SELECT 1 FROM webhook_event_claims h
           WHERE h.provider = i.provider AND h.body_hash = i.body_hash OFFSET 0)
FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS i(provider, event_id, body_hash, ord)
LEFT JOIN LATERAL (
    SELECT c.status FROM webhook_event_claims c
    WHERE c.provider = i.provider AND c.event_id = i.event_id
    LIMIT 1) c ON true`

// holdersSQL names the business keys' holders claimManySQL could not see,
// now that they have committed: it runs only when a claim lost a key to a
// concurrent one. A delivery skipped because a route it runs after was
// skipped names that route's holder (key_route).
const holdersSQL = `
UPDATE webhook_deliveries d
SET last_error = 'business key is held by ' || k.provider || '/' || k.event_id
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[])
    AS r(ord, provider, event_id, route, key_hash, key_route)
JOIN webhook_business_keys k ON k.route = r.key_route AND k.key_hash = r.key_hash
WHERE d.provider = r.provider AND d.event_id = r.event_id AND d.route = r.route
  AND d.status = 'skipped' AND d.last_error IS NULL
RETURNING r.ord, d.last_error`

// late reads, for the rows that lost their insert to a claim claimManySQL
// could not see, that claim's status or that the body's hash is held.
func late(ctx context.Context, tx pgx.Tx, rows []*claimRow) error {
	var providers, ids []string
	var hashes [][]byte
	var late []*claimRow
	for _, r := range rows {
		if !r.won && !r.replay && r.status == "" {
			late = append(late, r)
			providers, ids, hashes = append(providers, r.req.Event.Provider), append(ids, r.req.Event.ID), append(hashes, r.bodyHash)
		}
	}
	if len(late) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, lateSQL, providers, ids, hashes)
	if err != nil {
		return fmt.Errorf("reading %d existing claims: %w", len(late), err)
	}
	var ord int64
	var st *string
	var replay bool
	if _, err := pgx.ForEachRow(res, []any{&ord, &st, &replay}, func() error {
		r := late[ord-1]
		switch {
		case st != nil:
			r.status = Status(*st)
		case replay:
			r.replay = true
		}
		return nil
	}); err != nil {
		return fmt.Errorf("reading %d existing claims: %w", len(late), err)
	}
	return nil
}

// nameHolders names the business keys' holders that committed while
// claimManySQL waited on their keys, and takes the first as the skip
// reason of a claim that had none.
func nameHolders(ctx context.Context, tx pgx.Tx, rows []*claimRow) error {
	var ords []int64
	var providers, ids, routes, keyRoutes []string
	var hashes [][]byte
	add := func(j int, r *claimRow, route, keyRoute string, hash []byte) {
		ords = append(ords, int64(j))
		providers, ids = append(providers, r.req.Event.Provider), append(ids, r.req.Event.ID)
		routes, keyRoutes, hashes = append(routes, route), append(keyRoutes, keyRoute), append(hashes, hash)
	}
	for j, r := range rows {
		if !r.won || !r.unnamed {
			continue
		}
		for i, name := range r.names {
			if r.hashes[i] == nil {
				continue
			}
			add(j, r, name, name, r.hashes[i])
			for d, dep := range r.names {
				var up []string
				_ = json.Unmarshal([]byte(r.ancestors[d]), &up) // claimArgs wrote it
				if slices.Contains(up, name) {
					add(j, r, dep, name, r.hashes[i])
				}
			}
		}
	}
	if len(ords) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, holdersSQL, ords, providers, ids, routes, hashes, keyRoutes)
	if err != nil {
		return fmt.Errorf("naming business keys' holders: %w", err)
	}
	var ord int64
	var named string
	first := map[int64]string{} // the first holder named, per row
	if _, err := pgx.ForEachRow(res, []any{&ord, &named}, func() error {
		if f, ok := first[ord]; !ok || named < f {
			first[ord] = named
		}
		return nil
	}); err != nil {
		return fmt.Errorf("naming business keys' holders: %w", err)
	}
	for ord, named := range first {
		if r := rows[ord]; r.skipReason == nil {
			r.skipReason = &named
		}
	}
	return nil
}
