package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// Reconciler runs a provider's reconciliation on demand and lists runs;
// the worker wires it (internal/reconcile), so that the console imports
// no provider's API.
type Reconciler interface {
	// Configured reports whether provider has a reconcile section.
	Configured(provider string) bool
	// Reconcile runs one reconciliation of provider asked for by actor. A
	// run that failed is returned with its error (recorded on the run); a
	// provider already running answers claim.ErrReconcileRunning.
	Reconcile(ctx context.Context, provider, actor string, since time.Duration, dryRun bool) (claim.ReconcileRun, error)
	// Runs returns the newest runs, of provider when not "".
	Runs(ctx context.Context, provider string, limit int) ([]claim.ReconcileRun, error)
}

// actionReconcile is the audit action of a reconciliation asked for
// through the API.
const actionReconcile = "reconcile"

// maxReconcileSince bounds ?since=: Stripe keeps events 30 days.
const maxReconcileSince = 30 * 24 * time.Hour

// handleReconcile runs one reconciliation of the provider now, audited,
// and answers the run: its error, when it failed, names the provider's
// answer and never the key. ?dry_run=true counts and changes nothing;
// ?since=24h looks back that far instead of from the last run.
func (s *Server) handleReconcile(w http.ResponseWriter, r *http.Request, p principal) {
	name := r.PathValue("name")
	if s.reconciler == nil || !s.reconciler.Configured(name) {
		apiError(w, http.StatusNotFound, "no provider with a reconcile section is named "+strconv.Quote(cut(name, 64)))
		return
	}
	q := r.URL.Query()
	dryRun := q.Get("dry_run") == "true" || q.Get("dry_run") == "1"
	var since time.Duration
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxReconcileSince {
			apiError(w, http.StatusBadRequest, "since: a positive duration of at most 720h, such as 24h")
			return
		}
		since = d
	}
	run, err := s.reconciler.Reconcile(r.Context(), name, p.Name, since, dryRun)
	switch {
	case errors.Is(err, claim.ErrReconcileRunning):
		apiError(w, http.StatusConflict, "a reconciliation of "+name+" is already running")
		return
	case err != nil && run.ID == 0:
		s.fail(w, r, err)
		return
	}
	s.auditReconcile(r.Context(), run)
	writeJSON(w, http.StatusOK, run)
}

// auditReconcile writes the run's audit row, under the request's actor and
// origin; the run is recorded already, so a failure to write it is logged
// rather than undoing the run.
func (s *Server) auditReconcile(ctx context.Context, run claim.ReconcileRun) {
	detail := map[string]any{"run": run.ID, "dry_run": run.DryRun, "since": run.Since, "listed": run.Listed,
		"claimed": run.Claimed, "redelivered": run.Redelivered, "skipped": run.Skipped}
	if run.Error != "" {
		detail["error"] = run.Error
	}
	if err := operator.Audit(ctx, s.audit, s.logger, claim.AuditEntry{Action: actionReconcile, Target: run.Provider, Detail: detail}); err != nil {
		s.logger.Error("auditing a reconciliation", "provider", run.Provider, "run", run.ID, "error", err.Error())
	}
}

// reconcileQuery reads ?provider= and ?limit= (1–500, default 50).
func reconcileQuery(get func(string) string) (provider string, limit int, err error) {
	provider = get("provider")
	if len(provider) > 64 || !claim.StorableText(provider) {
		return "", 0, bad("provider: at most 64 characters of text")
	}
	limit = 50
	if v := get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 500 {
			return "", 0, bad("limit: a number from 1 to 500")
		}
	}
	return provider, limit, nil
}

// handleReconcileRuns answers the newest runs: {"runs": [...]}.
func (s *Server) handleReconcileRuns(w http.ResponseWriter, r *http.Request, _ principal) {
	provider, limit, err := reconcileQuery(r.URL.Query().Get)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs := []claim.ReconcileRun{}
	if s.reconciler != nil {
		if runs, err = s.reconciler.Runs(r.Context(), provider, limit); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": runs})
}

// reconcilePage is the runs page's data.
type reconcilePage struct {
	Runs     []claim.ReconcileRun
	Provider string
}

// handleReconcilePage lists the newest runs.
func (s *Server) handleReconcilePage(w http.ResponseWriter, r *http.Request, p principal) {
	provider, limit, err := reconcileQuery(r.URL.Query().Get)
	if err == nil {
		d := reconcilePage{Provider: provider}
		if s.reconciler != nil {
			d.Runs, err = s.reconciler.Runs(r.Context(), provider, limit)
		}
		if err == nil {
			s.render(w, http.StatusOK, "reconcile", pageData{Title: "Reconciliation", User: &p, Data: d})
			return
		}
	}
	s.pageError(w, r, &p, err, "/console/reconcile")
}
