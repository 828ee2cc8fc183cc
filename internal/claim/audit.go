package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Origins of audited actions: where a request came from.
const (
	OriginConsole = "console"
	OriginAPI     = "api"
	OriginCLI     = "cli"
)

type actorKey struct{}

type originKey struct{}

// WithActor returns ctx saying who acts under it: a signed-in user's or a
// token's name, cli:<OS user>, or one of hookgate's own actors
// (ActorBreaker). Audit writes it on every row. The console and the
// operator API put the request's principal in once it is authenticated;
// the CLI puts its own in before it acts.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// WithOrigin returns ctx saying that the actions taken under it come from
// origin (OriginConsole, OriginAPI, OriginCLI; "" for hookgate's own).
func WithOrigin(ctx context.Context, origin string) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

// ActorOf is the actor WithActor put in ctx; "" when none.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// OriginOf is the origin WithOrigin put in ctx; "" when none.
func OriginOf(ctx context.Context) string {
	o, _ := ctx.Value(originKey{}).(string)
	return o
}

// errNoActor is an audit row asked for under a context with no actor: a
// wiring mistake, refused rather than written anonymously.
var errNoActor = errors.New("no actor in the context")

// AuditEntry is an audited action as the code taking it states it; Audit
// adds the actor and the origin from the context.
type AuditEntry struct {
	Action string
	// Target is what was acted on: a route's name, provider/event_id.
	// Like the actor, it must be a bounded value the caller has verified,
	// never raw request input.
	Target string
	// Detail is marshalled to JSON; nil means {}.
	Detail any
}

// Audit writes one audit row: e under the actor and origin ctx carries.
// It is the only writer of audit_log, so that every row (an operator's
// action, a sign-in, the breaker's own change of state, a circuit closed by
// hand) says who and from where the same way. On a store Transact handed
// out, the row commits or vanishes with the action.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	actor := ActorOf(ctx)
	if actor == "" {
		return fmt.Errorf("writing audit row of %s: %w", e.Action, errNoActor)
	}
	raw := []byte("{}")
	if e.Detail != nil {
		var err error
		if raw, err = json.Marshal(e.Detail); err != nil {
			return fmt.Errorf("encoding audit detail: %w", err)
		}
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO audit_log (actor, action, target, detail, origin) VALUES ($1, $2, $3, $4, $5)`,
		actor, e.Action, e.Target, raw, OriginOf(ctx)); err != nil {
		return fmt.Errorf("writing audit row: %w", err)
	}
	return nil
}

// AuditRow is one audit row as stored.
type AuditRow struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Detail json.RawMessage `json:"detail"`
	// Origin is where the action came from: console, api or cli; empty
	// for hookgate's own actors and rows from before it was recorded.
	Origin string `json:"origin"`
}

// AuditPosition is an audit row's place in the newest-first order.
type AuditPosition struct {
	At time.Time `json:"at"`
	ID int64     `json:"id"`
}

// AuditFilter narrows an audit listing; an empty field matches any row.
type AuditFilter struct {
	Actor, Action, Target string
}

const (
	maxAuditListLimit   = 500
	defaultAuditListLen = 50
)

// AuditRows returns up to limit (0: 50, at most 501, so that a caller may
// read one more than a page to see whether a next page exists) of the
// audit rows f matches (each field exactly), newest first, after pos when
// it is not nil. The filters are tested on the rows the time index walks
// newest first: the audit is small next to the claims, and a listing
// stops at its page.
func (s *Store) AuditRows(ctx context.Context, f AuditFilter, limit int, pos *AuditPosition) ([]AuditRow, error) {
	if limit <= 0 {
		limit = defaultAuditListLen
	}
	limit = min(limit, maxAuditListLimit+1)
	var after any
	var afterID int64
	if pos != nil {
		after, afterID = pos.At, pos.ID
	}
	rows, err := s.db.Query(ctx, `SELECT id, at, actor, action, target, detail, origin FROM audit_log
WHERE ($1::timestamptz IS NULL OR at <= $1 AND (at, id) < ($1, $2))
  AND ($4 = '' OR actor = $4) AND ($5 = '' OR action = $5) AND ($6 = '' OR target = $6)
ORDER BY at DESC, id DESC LIMIT $3`, after, afterID, limit, f.Actor, f.Action, f.Target)
	if err != nil {
		return nil, fmt.Errorf("listing audit rows: %w", err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AuditRow])
	if err != nil {
		return nil, fmt.Errorf("listing audit rows: %w", err)
	}
	return entries, nil
}

// PruneAudit deletes audit rows older than age, batch (0: 1000) at a time,
// each batch a short statement of its own, oldest first; it returns how
// many it deleted, so far also with an error.
func (s *Store) PruneAudit(ctx context.Context, age time.Duration, batch int) (int, error) {
	if batch <= 0 {
		batch = 1000
	}
	deleted := 0
	for {
		tag, err := s.db.Exec(ctx, `DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log WHERE at < now() - make_interval(secs => $1) ORDER BY at, id LIMIT $2)`, age.Seconds(), batch)
		if err != nil {
			return deleted, fmt.Errorf("deleting audit rows after %d: %w", deleted, err)
		}
		deleted += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(batch) {
			return deleted, nil
		}
	}
}
