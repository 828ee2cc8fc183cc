package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
}

// routes lists every endpoint the worker serves.
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
		// The UI can cancel, retry and delete jobs: never without auth.
		mux.Handle(uiPrefix+"/", basicAuth(uiUser, o.uiPassword, o.ui))
	}
	return mux
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
func basicAuth(user, password string, next http.Handler) http.Handler {
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
		passOK := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
		if userOK&passOK != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="hookgate River UI", charset="UTF-8"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
