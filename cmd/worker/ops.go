package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/lockout"
	"github.com/hookgate/hookgate/internal/operator"
)

// The River UI's mount point and the one user its basic auth accepts.
const (
	uiPrefix = "/riverui"
	uiUser   = "admin"
)

// ops serves the worker's operational endpoints.
type ops struct {
	db     interface{ Ping(context.Context) error }
	reg    *prometheus.Registry
	logger *slog.Logger
	// ui is the River UI, nil when disabled; uiPassword guards it.
	ui         http.Handler
	uiPassword string
	// guard limits failed sign-ins per client address and name, for the
	// River UI and the console alike.
	guard *lockout.Guard
	// audit takes the audit rows of the River UI's failed sign-ins, as the
	// console's are; nil writes none (they are logged all the same).
	audit operator.Auditor
	// console serves the operator API and the web console; nil when
	// console.users and console.tokens are both empty, so that both 404.
	console http.Handler
}

// routes lists every endpoint the worker serves. Every state-changing
// request (the console's forms, the operator API's actions) must come from
// the page's own origin: a browser that has cached the basic-auth
// credentials sends them with a cross-site form too, so such requests are
// refused (403) before authentication. Scripts and curl, which send neither
// Origin nor Sec-Fetch-Site, are unaffected.
func (o *ops) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", o.handleHealthz)
	mux.HandleFunc("GET /readyz", o.handleReadyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{
		// A failed backlog query reports its two gauges as errors; the
		// other metrics are still served.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(o.logger.Handler(), slog.LevelWarn),
	}))
	if o.ui != nil {
		// The UI shows jobs and their arguments: never without auth, and
		// never to change them.
		mux.Handle(uiPrefix+"/", readOnly(o.basicAuth(uiUser, o.uiPassword, o.ui)))
	}
	if o.console != nil {
		mux.Handle("/api/v1/", o.console)
		mux.Handle("/console/", o.console)
		// The listener's root leads a person to the console.
		mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	}
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused"})
	}))
	return csrf.Handler(mux)
}

// handleHealthz answers while the process is up.
func (o *ops) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 503 while the database does not answer: a worker
// without its database cannot work jobs.
func (o *ops) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), dbCheckTimeout)
	defer cancel()
	if err := o.db.Ping(ctx); err != nil {
		o.logger.Warn("readiness check failed", slog.String("error", err.Error()))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "database unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// basicAuth lets through requests carrying user and password. Both are
// compared as SHA-256 digests in constant time, so neither their content
// nor their length shows in response times.
//
// Failed attempts are limited per client address and per name from that
// address (o.guard), and a client past its limit is refused with 429
// without its password being checked. Nothing is counted per name alone,
// so no one's failures lock out the right password sent from elsewhere,
// and the UI's user name is counted as any other (the answers do not tell
// it apart). A request without credentials (a browser's first, before it
// prompts) is neither a failure nor refused: it is asked for them.
func (o *ops) basicAuth(user, password string, next http.Handler) http.Handler {
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, given := r.BasicAuth()
		client := o.guard.Client(r)
		if wait := o.guard.Wait(client, u); given && wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many failed sign-ins; retry later"})
			return
		}
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
		passOK := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
		if userOK&passOK != 1 {
			if given {
				o.failedUI(r, client, u, userOK == 1)
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="hookgate River UI", charset="UTF-8"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
			return
		}
		o.guard.Succeed(client, u)
		next.ServeHTTP(w, r)
	})
}

// failedUI counts a failed sign-in to the River UI under the same guard
// as the console's and records it as they are: an audit row (which logs
// its line) under the UI's user name or a placeholder, never what the
// request sent, with the address it came from.
func (o *ops) failedUI(r *http.Request, client, name string, knownUser bool) {
	actor := "(unknown user)"
	if knownUser {
		actor = uiUser
	}
	if o.guard.Fail(client, name) {
		o.logger.Warn("River UI: too many failed sign-ins; refusing the client for a minute", slog.String("user", actor))
	}
	source, _, _ := net.SplitHostPort(r.RemoteAddr)
	detail := map[string]string{"via": "river ui", "source": source}
	if o.audit == nil {
		o.logger.Info("River UI: failed sign-in", slog.String("user", actor), slog.String("source", source))
		return
	}
	if err := operator.Audit(claim.WithActor(context.WithoutCancel(r.Context()), actor), o.audit, o.logger,
		claim.AuditEntry{Action: operator.ActionFailedSignIn, Detail: detail}); err != nil {
		o.logger.Error("River UI: auditing a failed sign-in", slog.String("error", err.Error()))
	}
}

// readOnly lets through only the requests that read (GET and HEAD): the
// River UI can pause queues and cancel, retry and delete jobs, outside
// the console's roles and its audit, so it is served read-only, and those
// requests are answered 405 before anything else looks at them.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{
				"error": "the River UI is read-only here: act through the console, the operator API or the worker's commands, which check roles and audit"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
