package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/operator"
)

// principal is who a request acts as: a configured user or token.
type principal struct {
	Name string
	Role string
}

func (p principal) Operator() bool { return p.Role == config.RoleOperator }

// unknownUser is the actor a failed sign-in under a name that is not
// configured is audited as: never what the request sent.
const unknownUser = "(unknown user)"

// errLocked is a sign-in refused, unchecked, because its client (or the
// name from that client) failed too often; wait says for how long.
type errLocked struct{ wait time.Duration }

func (e errLocked) Error() string { return "too many failed sign-ins; retry later" }

var errBadCredentials = errors.New("wrong name or password")

// dummyDigest is what a password given for a name that is not configured
// is compared with, so that such a name costs what a known one does.
var dummyDigest = sha256.Sum256([]byte("hookgate: no such user"))

// checkPassword returns the user name and password sign in as. Passwords
// are compared as SHA-256 digests in constant time. Failures are limited
// per client address and per name from that address (s.guard), a known
// name and an unknown one alike: the answers, their limits and their cost
// do not tell them apart, and nobody's failures refuse a right password
// sent from another address.
func (s *Server) checkPassword(r *http.Request, name, password, via string) (principal, error) {
	client := s.guard.Client(r)
	if wait := s.guard.Wait(client, name); wait > 0 {
		return principal{}, errLocked{wait}
	}
	acct, known := s.users[name]
	want := dummyDigest
	if known {
		want = s.passwordDigest(r.Context(), name, acct)
	}
	got := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !known {
		actor := unknownUser
		if known {
			actor = name
		}
		s.failed(r.Context(), client, name, actor, via)
		return principal{}, errBadCredentials
	}
	s.guard.Succeed(client, name)
	return principal{Name: name, Role: acct.role}, nil
}

// checkToken returns the token a bearer token is, comparing it with every
// configured token in constant time. Failures are limited per client
// address only: a token has no name to count under, and counting all
// tokens together let anyone lock every right one out.
func (s *Server) checkToken(r *http.Request, token string) (principal, error) {
	client := s.guard.Client(r)
	if wait := s.guard.Wait(client, ""); wait > 0 {
		return principal{}, errLocked{wait}
	}
	got := sha256.Sum256([]byte(token))
	var found principal
	match := 0
	for _, t := range s.tokens {
		want := t.secret.digest()
		eq := subtle.ConstantTimeCompare(got[:], want[:])
		if eq == 1 {
			found = principal{Name: t.name, Role: t.role}
		}
		match |= eq
	}
	if match != 1 {
		s.failed(r.Context(), client, "", "(bearer token)", "api bearer")
		return principal{}, errors.New("unknown bearer token")
	}
	return found, nil
}

// failed counts and audits a failed sign-in. actor is a configured name or
// a fixed placeholder, never what the request sent.
func (s *Server) failed(ctx context.Context, client, name, actor, via string) {
	if s.guard.Fail(client, name) {
		s.logger.Warn("console: too many failed sign-ins; refusing the client for a minute", slog.String("user", actor))
	}
	if err := operator.Audit(claim.WithActor(context.WithoutCancel(ctx), actor), s.audit, s.logger, claim.AuditEntry{
		Action: operator.ActionFailedSignIn, Detail: map[string]string{"via": via, "source": sourceOf(ctx)}}); err != nil {
		s.logger.Error("console: auditing a failed sign-in", slog.String("error", err.Error()))
	}
}

// apiAuth authenticates an API request by HTTP Basic (a user) or Bearer (a
// token) and, when act, requires the operator role. It answers 401, 403
// or 429 itself and returns false then.
func (s *Server) apiAuth(w http.ResponseWriter, r *http.Request, act bool) (principal, bool) {
	var p principal
	var err error
	header := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(header, " ")
	switch {
	case header == "":
		err = errors.New("credentials required")
	case strings.EqualFold(scheme, "Basic"):
		name, password, ok := r.BasicAuth()
		if !ok {
			err = errors.New("malformed basic credentials")
			break
		}
		p, err = s.checkPassword(r, name, password, "api basic")
	case strings.EqualFold(scheme, "Bearer"):
		p, err = s.checkToken(r, strings.TrimSpace(cred))
	default:
		err = errors.New("credentials required: HTTP Basic or a Bearer token")
	}
	var locked errLocked
	switch {
	case errors.As(err, &locked):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(locked.wait.Seconds()))))
		apiError(w, http.StatusTooManyRequests, locked.Error())
		return p, false
	case err != nil:
		w.Header().Set("WWW-Authenticate", `Basic realm="hookgate", charset="UTF-8"`)
		apiError(w, http.StatusUnauthorized, "unauthorized: "+err.Error())
		return p, false
	case act && !p.Operator():
		apiError(w, http.StatusForbidden, "forbidden: "+p.Name+" is a viewer; acting needs the operator role")
		return p, false
	}
	return p, true
}

// cookieName is the console's session cookie.
const cookieName = "hookgate_session"

// tokenHash is what the session table stores of a session token.
func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// fingerprint binds a session's token to the password it signed in with:
// HMAC-SHA-256 keyed by the password's digest, over the token. The session
// row keeps it; each request recomputes it from the password as it is now,
// so a changed password (at a restart, or a password_file read again) ends
// the session. Without the token, which only the cookie holds, a read of
// the table learns nothing of the password.
func fingerprint(digest [sha256.Size]byte, token string) []byte {
	m := hmac.New(sha256.New, digest[:])
	m.Write([]byte("hookgate console session v1\x00"))
	m.Write([]byte(token))
	return m.Sum(nil)
}

// startSession stores a new session for p and sets its cookie: HttpOnly,
// SameSite=Strict, and Secure when the request came over TLS (directly or
// through a proxy that says so).
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, p principal) error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	ctx := r.Context()
	// Expired sessions go when someone signs in: the table holds about one
	// row per live session.
	if _, err := s.db.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at < now()`); err != nil {
		return err
	}
	fp := fingerprint(s.passwordDigest(ctx, p.Name, s.users[p.Name]), token)
	if _, err := s.db.Exec(ctx, `INSERT INTO console_sessions (token_hash, actor, expires_at, fingerprint)
VALUES ($1, $2, now() + make_interval(secs => $3), $4)`, tokenHash(token), p.Name, s.ttl.Seconds(), fp); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: token, Path: "/console/", MaxAge: int(s.ttl.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
	return nil
}

func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// session returns who the request's session cookie signs in as; false
// without a live session. A session whose user is no longer configured, or
// whose password has changed since it signed in (its fingerprint does not
// match), is ended: its row is deleted.
func (s *Server) session(r *http.Request) (principal, string, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return principal{}, "", false
	}
	var name string
	var fp []byte
	err = s.db.QueryRow(r.Context(), `SELECT actor, fingerprint FROM console_sessions WHERE token_hash = $1 AND expires_at > now()`,
		tokenHash(c.Value)).Scan(&name, &fp)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.logger.Warn("console: reading a session", slog.String("error", err.Error()))
		}
		return principal{}, "", false
	}
	acct, ok := s.users[name]
	if !ok || !hmac.Equal(fp, fingerprint(s.passwordDigest(r.Context(), name, acct), c.Value)) {
		if _, err := s.db.Exec(r.Context(), `DELETE FROM console_sessions WHERE token_hash = $1`, tokenHash(c.Value)); err != nil {
			s.logger.Warn("console: ending a stale session", slog.String("error", err.Error()))
		} else if ok {
			s.logger.Info("console: session ended: the user's password changed", slog.String("user", name))
		}
		return principal{}, "", false
	}
	return principal{Name: name, Role: acct.role}, c.Value, true
}

// endAllSessions deletes every session of p, the request's own included,
// in one transaction with its audit row, and clears the cookie.
func (s *Server) endAllSessions(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := claim.WithActor(r.Context(), p.Name)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE actor = $1`, p.Name)
		if err != nil {
			return err
		}
		return operator.Audit(ctx, claim.NewStore(tx, nil, nil), s.logger, claim.AuditEntry{Action: operator.ActionEndSessions,
			Detail: map[string]any{"via": "console", "sessions": tag.RowsAffected()}})
	})
	if err != nil {
		return err
	}
	s.clearCookie(w, r)
	return nil
}

// endSession deletes the session's row, which ends it on every replica,
// and clears the cookie.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request, token string) error {
	if _, err := s.db.Exec(r.Context(), `DELETE FROM console_sessions WHERE token_hash = $1`, tokenHash(token)); err != nil {
		return err
	}
	s.clearCookie(w, r)
	return nil
}

func (s *Server) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
}
