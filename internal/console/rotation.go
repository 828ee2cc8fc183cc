package console

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/secretfile"
)

// rotations remembers, per user whose password is read from a file, the
// password's digest the server last saw, so that a change is acted on
// once, when the server first sees it.
type rotations struct {
	mu   sync.Mutex
	seen map[string][sha256.Size]byte
}

// passwordDigest is the digest of name's password as it is now (acct is
// name's account). When the password came from a file that changed since
// the server last read it, the user's sessions are ended first (see
// endRotatedSessions), so that no session outlives the password it signed
// in with, even one not used while the new password was current.
func (s *Server) passwordDigest(ctx context.Context, name string, acct account) [sha256.Size]byte {
	d := acct.secret.digest()
	if acct.secret.file != nil {
		s.endRotatedSessions(ctx, name, d)
	}
	return d
}

// endRotatedSessions deletes every session of name that started before
// now when digest is not the password's digest the server last saw. A
// session's fingerprint can be checked only with its token, which the
// table does not hold, so every older session goes: a session signed in
// with the new password on a replica that read the file first is ended
// too, and its user signs in again once. Sessions signed in from here on
// wait for the delete (the lock), so none signed in with the new password
// on this replica is lost. A failed delete is logged and tried again at
// the next read; the fingerprint still refuses the sessions meanwhile.
func (s *Server) endRotatedSessions(ctx context.Context, name string, digest [sha256.Size]byte) {
	s.rotated.mu.Lock()
	defer s.rotated.mu.Unlock()
	if prev, ok := s.rotated.seen[name]; ok && prev == digest {
		return
	}
	tag, err := s.db.Exec(context.WithoutCancel(ctx), `DELETE FROM console_sessions WHERE actor = $1 AND created_at <= now()`, name)
	if err != nil {
		s.logger.Warn("console: ending the sessions of a changed password", slog.String("user", name), slog.String("error", err.Error()))
		return
	}
	if _, ok := s.rotated.seen[name]; ok {
		s.logger.Info("console: the user's password changed; their sessions ended",
			slog.String("user", name), slog.Int64("sessions", tag.RowsAffected()))
	}
	s.rotated.seen[name] = digest
}

// WatchSecrets reads the password files of the console's users again every
// secretfile.Check until ctx ends, ending a user's sessions as soon as the
// password changes (see passwordDigest), whether or not anyone signs in or
// uses a session meanwhile: a password that goes A → B → A leaves no
// session of A's first time. It returns at once when no password comes
// from a file.
func (s *Server) WatchSecrets(ctx context.Context) {
	if len(s.rotated.seen) == 0 {
		return
	}
	tick := time.NewTicker(secretfile.Check)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for name, acct := range s.users {
			if acct.secret.file != nil {
				s.passwordDigest(ctx, name, acct)
			}
		}
	}
}
