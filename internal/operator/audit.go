// Package operator holds the actions an operator takes on claims and
// routes (retry, bulk retry, pause, resume) and their audit, shared by the
// worker's CLI, the operator API and the web console, so that each action
// has one implementation whoever asks for it.
package operator

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/user"

	"github.com/hookgate/hookgate/internal/claim"
)

// Audited actions.
const (
	ActionRetry        = "retry"
	ActionBulkRetry    = "bulk_retry"
	ActionPause        = "pause"
	ActionResume       = "resume"
	ActionSignIn       = "sign_in"
	ActionFailedSignIn = "failed_sign_in"
	ActionSignOut      = "sign_out"
	ActionEndSessions  = "end_sessions"
)

// Auditor writes audit rows: a *claim.Store, the action's transactional
// one where it has one.
type Auditor interface {
	Audit(ctx context.Context, e claim.AuditEntry) error
}

// Audit writes e's audit row through st, under the actor and origin ctx
// carries (claim.WithActor, claim.WithOrigin), and logs it.
func Audit(ctx context.Context, st Auditor, logger *slog.Logger, e claim.AuditEntry) error {
	if err := st.Audit(ctx, e); err != nil {
		return err
	}
	logAudit(ctx, logger, e)
	return nil
}

// logAudit logs an audit row written under ctx.
func logAudit(ctx context.Context, logger *slog.Logger, e claim.AuditEntry) {
	if logger == nil {
		return
	}
	detail := []byte("{}")
	if e.Detail != nil {
		detail, _ = json.Marshal(e.Detail) // Audit has marshalled it already
	}
	logger.Info("audit", slog.String("actor", claim.ActorOf(ctx)), slog.String("action", e.Action),
		slog.String("target", e.Target), slog.String("origin", claim.OriginOf(ctx)), slog.String("detail", string(detail)))
}

// CLI returns ctx for a command-line action: the actor CLIActor, the
// origin cli.
func CLI(ctx context.Context) context.Context {
	return claim.WithOrigin(claim.WithActor(ctx, CLIActor()), claim.OriginCLI)
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
