// Package operator holds the actions an operator takes on claims and
// routes (retry, bulk retry, pause, resume) and their audit, shared by the
// worker's CLI, the operator API and the web console, so that each action
// has one implementation whoever asks for it.
package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Audited actions.
const (
	ActionRetry         = "retry"
	ActionBulkRetry     = "bulk_retry"
	ActionPause         = "pause"
	ActionResume        = "resume"
	ActionSignIn        = "sign_in"
	ActionFailedSignIn  = "failed_sign_in"
	ActionSignOut       = "sign_out"
	ActionEndSessions   = "end_sessions"
	maxAuditListLimit   = 500
	defaultAuditListLen = 50
)

// Entry is one audit row.
type Entry struct {
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

// Origins of audited actions.
const (
	OriginConsole = "console"
	OriginAPI     = "api"
	OriginCLI     = "cli"
)

type originKey struct{}

// WithOrigin returns ctx saying that the actions taken under it come from
// origin (OriginConsole, OriginAPI); Record writes it with their rows.
func WithOrigin(ctx context.Context, origin string) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

// originOf is the origin ctx carries; without one, cli for a CLI actor
// (see CLIActor), else none.
func originOf(ctx context.Context, actor string) string {
	if o, ok := ctx.Value(originKey{}).(string); ok {
		return o
	}
	if strings.HasPrefix(actor, "cli:") {
		return OriginCLI
	}
	return ""
}

// Exec runs a statement: a pool or a transaction.
type Exec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier reads: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Record writes one audit row on db (the action's transaction where it has
// one) and logs it. detail is marshalled to JSON; nil means {}. Actor and
// target must be bounded values the caller has verified (a configured
// name, an existing claim's key), never raw request input.
func Record(ctx context.Context, db Exec, logger *slog.Logger, actor, action, target string, detail any) error {
	raw := []byte("{}")
	if detail != nil {
		var err error
		if raw, err = json.Marshal(detail); err != nil {
			return fmt.Errorf("encoding audit detail: %w", err)
		}
	}
	origin := originOf(ctx, actor)
	if _, err := db.Exec(ctx, `INSERT INTO audit_log (actor, action, target, detail, origin) VALUES ($1, $2, $3, $4, $5)`,
		actor, action, target, raw, origin); err != nil {
		return fmt.Errorf("writing audit row: %w", err)
	}
	if logger != nil {
		logger.Info("audit", slog.String("actor", actor), slog.String("action", action),
			slog.String("target", target), slog.String("origin", origin), slog.String("detail", string(raw)))
	}
	return nil
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

// ListAudit returns up to limit (0: 50, at most 500) audit rows newest
// first, after pos when it is not nil.
func ListAudit(ctx context.Context, db Querier, limit int, pos *AuditPosition) ([]Entry, error) {
	return ListAuditWhere(ctx, db, AuditFilter{}, limit, pos)
}

// ListAuditWhere is ListAudit of the rows f matches (each field exactly).
// The filters are tested on the rows the time index walks newest first:
// the audit is small next to the claims, and a listing stops at its page.
func ListAuditWhere(ctx context.Context, db Querier, f AuditFilter, limit int, pos *AuditPosition) ([]Entry, error) {
	if limit <= 0 {
		limit = defaultAuditListLen
	}
	limit = min(limit, maxAuditListLimit+1) // a caller may read one more to see whether a next page exists
	var after any
	var afterID int64
	if pos != nil {
		after, afterID = pos.At, pos.ID
	}
	rows, err := db.Query(ctx, `SELECT id, at, actor, action, target, detail, origin FROM audit_log
WHERE ($1::timestamptz IS NULL OR at <= $1 AND (at, id) < ($1, $2))
  AND ($4 = '' OR actor = $4) AND ($5 = '' OR action = $5) AND ($6 = '' OR target = $6)
ORDER BY at DESC, id DESC LIMIT $3`, after, afterID, limit, f.Actor, f.Action, f.Target)
	if err != nil {
		return nil, fmt.Errorf("listing audit rows: %w", err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Entry])
	if err != nil {
		return nil, fmt.Errorf("listing audit rows: %w", err)
	}
	return entries, nil
}

// CLIActor is the actor of a command-line action: cli: and the OS user
// running it.
func CLIActor() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = "unknown"
	}
	return "cli:" + name
}

// PruneAudit deletes audit rows older than age, batch (0: 1000) at a time,
// each batch a short statement of its own, oldest first; it returns how
// many it deleted, so far also with an error.
func PruneAudit(ctx context.Context, db Exec, age time.Duration, batch int) (int, error) {
	if batch <= 0 {
		batch = 1000
	}
	deleted := 0
	for {
		tag, err := db.Exec(ctx, `DELETE FROM audit_log WHERE id IN (
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
