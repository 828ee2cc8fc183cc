package console

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/secretfile"
)

// rotations remembers, per user, the digest of the password the server
// last checked against the verifier Postgres keeps (console_user_secrets),
// so that each password is checked once: at the first use of the user
// after the server starts (CheckPasswords does it for every user at
// start), and again when a password file changes.
type rotations struct {
	mu   sync.Mutex
	seen map[string][sha256.Size]byte
}

// passwordDigest is the digest of name's password as it is now (acct is
// name's account). When the server has not yet checked this password
// against the verifier in Postgres, it does first (see
// endRotatedSessions): a password that differs from the one last recorded
// — changed in the environment across a restart, or in its file — ends
// the user's sessions, so that no session outlives the password it signed
// in with, even one not used while the new password was current.
func (s *Server) passwordDigest(ctx context.Context, name string, acct account) [sha256.Size]byte {
	d := acct.secret.digest()
	s.endRotatedSessions(ctx, name, d)
	return d
}

// CheckPasswords checks every user's password against the verifier
// Postgres keeps, ending the sessions of each user whose password changed
// since a worker last recorded it (see endRotatedSessions). The worker
// calls it once at start, before it serves; a user it could not check is
// checked again at their first use.
func (s *Server) CheckPasswords(ctx context.Context) {
	for name, acct := range s.users {
		s.passwordDigest(ctx, name, acct)
	}
}

// checkTimeout bounds one check of a password against its verifier.
const checkTimeout = 10 * time.Second

// endRotatedSessions deletes every session of name that started before
// now when digest is not the password recorded in Postgres for name (or
// none is: the first start after migration 00027), and records digest's
// verifier instead. It checks each digest once per server (s.rotated).
//
// The compare and the update run in one transaction holding the user's
// row, so replicas that start at once with the same password end the
// sessions once, not each other's new ones. A session's fingerprint can
// be checked only with its token, which the table does not hold, so every
// older session goes: a session signed in with the new password on a
// replica that read a changed file first is ended too, and its user signs
// in again once. Sessions signed in on this replica wait for the delete
// (the lock), so none signed in with the new password here is lost. A
// failed check is logged and tried again at the next use; the fingerprint
// still refuses the sessions of another password meanwhile.
func (s *Server) endRotatedSessions(ctx context.Context, name string, digest [sha256.Size]byte) {
	s.rotated.mu.Lock()
	defer s.rotated.mu.Unlock()
	if prev, ok := s.rotated.seen[name]; ok && prev == digest {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	res, err := s.recordPassword(ctx, name, digest)
	if err != nil {
		s.logger.Warn("console: checking whether the user's password changed", slog.String("user", name), slog.String("error", err.Error()))
		return
	}
	switch {
	case res.changed:
		s.logger.Info("console: the user's password changed; their sessions ended",
			slog.String("user", name), slog.Int64("sessions", res.ended))
	case res.first && res.ended > 0:
		s.logger.Info("console: no password recorded for the user yet (migration 00027); their sessions ended once",
			slog.String("user", name), slog.Int64("sessions", res.ended))
	}
	s.rotated.seen[name] = digest
}

// recorded is what recordPassword did: first when name had no verifier
// yet, changed when it had another password's; ended counts the sessions
// it deleted.
type recorded struct {
	first, changed bool
	ended          int64
}

// recordPassword compares digest with name's verifier in Postgres and,
// when there is none or it differs, stores digest's and deletes name's
// sessions started before now, all in one transaction: the row lock, or
// the insert, makes a replica that records the same password at the same
// time wait, then find it recorded.
func (s *Server) recordPassword(ctx context.Context, name string, digest [sha256.Size]byte) (recorded, error) {
	for range 3 {
		res, err := s.recordPasswordOnce(ctx, name, digest)
		if !errors.Is(err, errRecordedMeanwhile) {
			return res, err
		}
	}
	return recorded{}, errors.New("recording the password's verifier: other replicas kept recording it")
}

// recordPasswordOnce is one try of recordPassword's transaction;
// errRecordedMeanwhile when another replica recorded name's first
// password between its read and its insert.
func (s *Server) recordPasswordOnce(ctx context.Context, name string, digest [sha256.Size]byte) (recorded, error) {
	var res recorded
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		res = recorded{}
		salt := make([]byte, 16)
		_, _ = rand.Read(salt)
		var oldSalt, oldVerifier []byte
		err := tx.QueryRow(ctx, `SELECT salt, verifier FROM console_user_secrets WHERE actor = $1 FOR UPDATE`, name).
			Scan(&oldSalt, &oldVerifier)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// A replica inserting at the same time makes this insert wait,
			// then do nothing: recordPassword tries again, and finds the
			// row.
			v, err := verifier(digest, salt)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO console_user_secrets (actor, salt, verifier) VALUES ($1, $2, $3)
ON CONFLICT (actor) DO NOTHING`, name, salt, v)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errRecordedMeanwhile
			}
			res.first = true
		case err != nil:
			return err
		default:
			old, err := verifier(digest, oldSalt)
			if err != nil {
				return err
			}
			if hmac.Equal(old, oldVerifier) {
				return nil
			}
			v, err := verifier(digest, salt)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE console_user_secrets SET salt = $2, verifier = $3, updated_at = now() WHERE actor = $1`,
				name, salt, v); err != nil {
				return err
			}
			res.changed = true
		}
		tag, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE actor = $1 AND created_at <= now()`, name)
		res.ended = tag.RowsAffected()
		return err
	})
	if err != nil {
		return recorded{}, fmt.Errorf("recording the password's verifier: %w", err)
	}
	return res, nil
}

// errRecordedMeanwhile is another replica recording a user's first
// password while this one was about to.
var errRecordedMeanwhile = errors.New("the password was recorded meanwhile")

// verifierIterations is PBKDF2's work for a verifier, paid once per user
// when a worker starts and when a password file changes: a few
// milliseconds, and ten thousand times a bare digest's for a guess.
const verifierIterations = 10_000

// verifier is what console_user_secrets keeps of a password whose SHA-256
// is digest: PBKDF2-HMAC-SHA-256 of the digest under salt, so that a read
// of the table gives neither the password nor its digest, nor lets either
// be guessed cheaply.
func verifier(digest [sha256.Size]byte, salt []byte) ([]byte, error) {
	if len(salt) == 0 {
		return nil, errors.New("a password verifier without salt")
	}
	return pbkdf2.Key(sha256.New, string(digest[:]), salt, verifierIterations, sha256.Size)
}

// WatchSecrets reads the password files of the console's users again every
// secretfile.Check until ctx ends, ending a user's sessions as soon as the
// password changes (see passwordDigest), whether or not anyone signs in or
// uses a session meanwhile: a password that goes A → B → A leaves no
// session of A's first time. It returns at once when no password comes
// from a file.
func (s *Server) WatchSecrets(ctx context.Context) {
	files := map[string]account{}
	for name, acct := range s.users {
		if acct.secret.file != nil {
			files[name] = acct
		}
	}
	if len(files) == 0 {
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
		for name, acct := range files {
			s.passwordDigest(ctx, name, acct)
		}
	}
}
