package console

import (
	"io/fs"
	"net/http"
)

// Handler serves /api/v1/ and /console/; mount it at both. Every route of
// the operator API and of the pages is listed here, in one place: api
// wraps a handler in the API's authentication (act: operators only), page
// in the session's. Refusing cross-origin state changes is the caller's
// (the listener's mux wraps every route in net/http.CrossOriginProtection).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()

	// The operator API (docs/api.md).
	mux.HandleFunc("GET /api/v1/claims", s.api(false, s.handleListClaims))
	mux.HandleFunc("GET /api/v1/claims/{provider}/{event_id}", s.api(false, s.handleGetClaim))
	mux.HandleFunc("POST /api/v1/claims/{provider}/{event_id}/retry", s.api(true, s.handleRetry))
	mux.HandleFunc("POST /api/v1/retry", s.api(true, s.handleBulkRetry))
	mux.HandleFunc("GET /api/v1/routes", s.api(false, s.handleRoutes))
	mux.HandleFunc("POST /api/v1/routes/{name}/pause", s.api(true, s.handlePause(true)))
	mux.HandleFunc("POST /api/v1/routes/{name}/resume", s.api(true, s.handlePause(false)))
	mux.HandleFunc("POST /api/v1/routes/{name}/breaker/close", s.api(true, s.handleBreakerClose))
	mux.HandleFunc("GET /api/v1/stats", s.api(false, s.handleStats))
	mux.HandleFunc("GET /api/v1/audit", s.api(false, s.handleAudit))
	mux.HandleFunc("POST /api/v1/providers/{name}/reconcile", s.api(true, s.handleReconcile))
	mux.HandleFunc("GET /api/v1/reconcile/runs", s.api(false, s.handleReconcileRuns))
	mux.HandleFunc("/api/v1/", s.api(false, func(w http.ResponseWriter, _ *http.Request, _ principal) {
		apiError(w, http.StatusNotFound, "no such endpoint")
	}))

	// The console's pages.
	static, _ := fs.Sub(files, "static")
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /console/sign-in", s.handleSignInPage)
	mux.HandleFunc("POST /console/sign-in", s.handleSignIn)
	mux.HandleFunc("POST /console/sign-out", s.handleSignOut)
	mux.HandleFunc("POST /console/sessions/end-all", s.page(false, s.handleEndAllSessions))
	mux.HandleFunc("GET /console/{$}", s.page(false, s.handleOverview))
	mux.HandleFunc("GET /console/claims", s.page(false, s.handleClaimsPage))
	mux.HandleFunc("GET /console/claims/retry", s.page(true, s.handleBulkConfirmPage))
	mux.HandleFunc("POST /console/claims/retry", s.page(true, s.handleBulkRetryPage))
	mux.HandleFunc("GET /console/claims/{provider}/{event_id}", s.page(false, s.handleClaimPage))
	mux.HandleFunc("GET /console/claims/{provider}/{event_id}/retry", s.page(true, s.handleConfirmPage))
	mux.HandleFunc("POST /console/claims/{provider}/{event_id}/retry", s.page(true, s.handleRetryPage))
	mux.HandleFunc("GET /console/routes", s.page(false, s.handleRoutesPage))
	mux.HandleFunc("GET /console/routes/{name}/pause", s.page(true, s.handlePauseConfirmPage))
	mux.HandleFunc("POST /console/routes/{name}/pause", s.page(true, s.handlePausePage(true)))
	mux.HandleFunc("POST /console/routes/{name}/resume", s.page(true, s.handlePausePage(false)))
	mux.HandleFunc("POST /console/routes/{name}/breaker/close", s.page(true, s.handleBreakerClosePage))
	mux.HandleFunc("GET /console/audit", s.page(false, s.handleAuditPage))
	mux.HandleFunc("GET /console/reconcile", s.page(false, s.handleReconcilePage))
	mux.HandleFunc("/console/", s.page(false, func(w http.ResponseWriter, r *http.Request, p principal) {
		s.render(w, http.StatusNotFound, "error", pageData{Title: "Not found", User: &p, Data: errorPage{"No such page.", "/console/"}})
	}))
	return mux
}
