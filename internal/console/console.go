// Package console serves the operator API (/api/v1/, JSON) and the web
// console (/console/, server-rendered HTML) on the worker's listen address.
// Both act through the operator package, as the CLI does, and every
// action is audited under the signed-in user or token.
package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/lockout"
	"github.com/hookgate/hookgate/internal/operator"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// DB is what the console runs its own statements on (sessions, audit):
// the worker's pool.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Options configure a Server.
type Options struct {
	Config  *config.Config
	Secrets config.ConsoleSecrets
	// SecretFiles holds, by user or token name, the password_file and
	// token_file secrets, which take the place of Secrets' entry.
	SecretFiles map[string]*secretfile.File
	// Store reopens claims (and reads them when Reads is nil); its jobs
	// go through the worker's River client.
	Store *claim.Store
	// Reads is what the API and the pages read claims and the audit
	// through: the worker's claim.ReadPool, so that no read holds a
	// connection deliveries need, and none runs past its statement
	// timeout (answered 503). Nil reads through Store and DB. Sessions,
	// sign-ins and actions use DB and Store whatever it is.
	Reads claim.DB
	// Queues pauses and resumes routes (the worker's River client).
	Queues claim.Queues
	DB     DB
	Logger *slog.Logger
	// Guard limits failed sign-ins per client address and name; shared
	// with the other endpoints of the listener. Nil means a guard of its
	// own that believes no proxy.
	Guard *lockout.Guard
	// CountTimeout bounds the claims list's count of its matches; the
	// page says "many" past it. 0 means 300 ms.
	CountTimeout time.Duration
	// Reconciler runs reconciliations on demand and lists their runs;
	// nil answers no provider and no run.
	Reconciler Reconciler
	// Cells, when there are several, are the cells the console reads
	// across and acts in, in configuration order; Store, Reads and Queues
	// are then the first cell's. With one (or none), the console reads
	// Store and Reads alone, as it always has.
	Cells []Cell
}

// claimReader is what the console reads of the claim tables itself; every
// change to them goes through operator.Actions instead, so that it is
// audited. *claim.Store is one.
type claimReader interface {
	Get(ctx context.Context, provider, eventID string) (claim.Record, []claim.Delivery, error)
	Attempts(ctx context.Context, provider, eventID string, full bool) (map[string][]claim.AttemptRecord, error)
	Payload(ctx context.Context, provider, eventID string) (body []byte, contentEncoding string, err error)
	SearchClaims(ctx context.Context, f claim.Search) ([]claim.Record, error)
	CountClaimsUpTo(ctx context.Context, f claim.Search, bound int) (int, error)
	CountFailedByRoute(ctx context.Context, f claim.Search) ([]claim.RouteCount, error)
	DeliveriesOf(ctx context.Context, keys []claim.EventKey) (map[claim.EventKey][]claim.Delivery, error)
	RouteStates(ctx context.Context, q claim.Queues, routes []string) ([]claim.RouteState, error)
	StatusCounts(ctx context.Context, since time.Time) (map[claim.Status]int, error)
	RouteActivity(ctx context.Context, since time.Time, step time.Duration, n int) ([]claim.Activity, error)
	Stats(ctx context.Context, window time.Duration) (claim.Stats, error)
	Holds(ctx context.Context, provider, eventID string, paced func(route string) bool) (map[string]claim.Hold, error)
}

// auditLog is what the console writes and reads of the audit (sign-ins,
// the audit page); actions write theirs through operator.Actions.
// *claim.Store is one.
type auditLog interface {
	Audit(ctx context.Context, e claim.AuditEntry) error
	AuditRows(ctx context.Context, f claim.AuditFilter, limit int, pos *claim.AuditPosition) ([]claim.AuditRow, error)
}

// Server is the operator API and the console.
type Server struct {
	cfg    *config.Config
	store  claimReader
	audit  auditLog
	queues claim.Queues
	db     DB
	// auditRows is what the audit page and the API list the audit
	// through: a store over Options.Reads, else audit.
	auditRows interface {
		AuditRows(ctx context.Context, f claim.AuditFilter, limit int, pos *claim.AuditPosition) ([]claim.AuditRow, error)
	}
	logger  *slog.Logger
	guard   *lockout.Guard
	actions *cellActions
	// cellNames are the cells read across, in configuration order; nil
	// with one cell.
	cellNames []string
	ttl       time.Duration
	// countTime is Options.CountTimeout.
	countTime time.Duration
	// users and tokens hold the digests of each name's secret.
	users  map[string]account
	tokens []tokenAccount
	pages  *pages
	// rotated ends the sessions of a user whose password changed: across
	// a restart, or in its file.
	rotated rotations
	// reconciler is Options.Reconciler.
	reconciler Reconciler
}

type account struct {
	role   string
	secret secret
}

type tokenAccount struct {
	name   string
	role   string
	secret secret
}

// secret is a password or token: from the environment, fixed at start,
// or from a file, read again when it changes.
type secret struct {
	fixed [sha256.Size]byte
	file  *secretfile.File
}

// digest is what a presented secret's SHA-256 is compared with.
func (s secret) digest() [sha256.Size]byte {
	if s.file != nil {
		return sha256.Sum256(s.file.Value())
	}
	return s.fixed
}

func secretOf(opts Options, name string, fixed map[string]string) secret {
	if f := opts.SecretFiles[name]; f != nil {
		return secret{file: f}
	}
	return secret{fixed: sha256.Sum256([]byte(fixed[name]))}
}

// New returns the server of opts.
func New(opts Options) *Server {
	s := &Server{
		cfg: opts.Config, store: opts.Store, audit: opts.Store, queues: opts.Queues, db: opts.DB, logger: opts.Logger,
		guard: opts.Guard, ttl: opts.Config.Console.SessionTTL.D(), countTime: cmp.Or(opts.CountTimeout, defaultCountTime),
		users: map[string]account{},
		pages: loadPages(), reconciler: opts.Reconciler,
	}
	if s.guard == nil {
		s.guard = lockout.NewGuard(nil)
	}
	s.auditRows = s.audit
	if opts.Reads != nil {
		reads := claim.NewStore(opts.Reads, nil, nil)
		s.store, s.auditRows = reads, reads
	}
	if s.ttl <= 0 {
		s.ttl = config.DefaultSessionTTL
	}
	s.rotated.seen = map[string][sha256.Size]byte{}
	for _, u := range opts.Config.Console.Users {
		acct := account{role: u.Role, secret: secretOf(opts, u.Name, opts.Secrets.Passwords)}
		s.users[u.Name] = acct
	}
	for _, t := range opts.Config.Console.Tokens {
		s.tokens = append(s.tokens, tokenAccount{name: t.Name, role: t.Role, secret: secretOf(opts, t.Name, opts.Secrets.Tokens)})
	}
	routes := make([]string, len(opts.Config.Routes))
	for i, r := range opts.Config.Routes {
		routes[i] = r.Name
	}
	s.actions = &cellActions{cfg: opts.Config, Routes: routes, cells: []operator.Cell{{
		Name: opts.Config.CellList()[0].Name, Actions: &operator.Actions{Store: opts.Store, Queues: opts.Queues, Routes: routes, Logger: opts.Logger}}}}
	if len(opts.Cells) > 1 {
		s.acrossCells(opts, routes)
	}
	return s
}

// acrossCells makes s read across opts.Cells and act in each.
func (s *Server) acrossCells(opts Options, routes []string) {
	m := &cellsReader{cfg: opts.Config, logger: s.logger}
	s.actions.cells = nil
	for _, c := range opts.Cells {
		reads := c.Store
		if c.Reads != nil {
			reads = claim.NewStore(c.Reads, nil, nil)
		}
		m.cells = append(m.cells, cellReader{name: c.Name, reads: reads, queues: c.Queues})
		s.actions.cells = append(s.actions.cells, operator.Cell{Name: c.Name,
			Actions: &operator.Actions{Store: c.Store, Queues: c.Queues, Routes: routes, Logger: opts.Logger}})
	}
	s.store, s.auditRows, s.cellNames = m, m, m.names()
}

// unavailable returns the cells r's reads could not reach; nil when all
// answered, and always with one cell.
func (s *Server) unavailable(r *http.Request) []string {
	return unavailableOf(r.Context(), s.cellNames)
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers {"error": msg}.
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
