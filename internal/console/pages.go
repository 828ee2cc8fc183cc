package console

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

//go:embed templates/*.html static/*
var files embed.FS

// pageNames are the console's page templates, each rendered in layout.html.
var pageNames = []string{"signin", "error", "overview", "claims", "claim", "confirm", "routes", "audit", "bulkconfirm", "pauseconfirm", "reconcile"}

type pages struct{ t map[string]*template.Template }

// claimURL is a claim's page; each part is path-escaped, so an event id
// holding / ? or # stays one segment.
func claimURL(provider, eventID string) string {
	return "/console/claims/" + url.PathEscape(provider) + "/" + url.PathEscape(eventID)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func loadPages() *pages {
	funcs := template.FuncMap{
		"claimURL": claimURL,
		"retryURL": func(provider, eventID string) string { return claimURL(provider, eventID) + "/retry" },
		"stamp":    stamp,
		"stampp": func(t *time.Time) string {
			if t == nil {
				return "-"
			}
			return stamp(*t)
		},
		"cut":       cut,
		"ago":       func(t time.Time) string { return ago(t, time.Now()) },
		"agop":      func(t *time.Time) string { return agoPtr(t, time.Now()) },
		"auditLink": auditLink,
		"pretty":    pretty,
	}
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		p.t[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	return p
}

// pageData is what every page template gets.
type pageData struct {
	Title string
	User  *principal
	Flash string
	Data  any
}

// securityHeaders forbid scripts, anything from elsewhere, framing and
// caching on every console answer.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// render writes page name; a template error is logged and answered 500
// before anything is written.
func (s *Server) render(w http.ResponseWriter, status int, name string, d pageData) {
	var buf bytes.Buffer
	if err := s.pages.t[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		s.logger.Error("console: rendering a page", slog.String("page", name), slog.String("error", err.Error()))
		securityHeaders(w)
		http.Error(w, "internal error; see the worker's log", http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorPage struct {
	Message string
	Back    string
}

// pageError renders err as a page: 400, 404 or 409 with its message, 503
// naming the bound a read ran into (readTimedOut), else 500 without it.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, p *principal, err error, back string) {
	if s.readTimedOut(w, r, err, func(status int, msg string) {
		s.render(w, status, "error", pageData{Title: "Unavailable", User: p, Data: errorPage{msg, back}})
	}) {
		return
	}
	status, msg := http.StatusInternalServerError, "internal error; see the worker's log"
	var br *badRequest
	var nf *operator.NotFoundError
	var rf *operator.RefusedError
	var iv *operator.InvalidError
	switch {
	case errors.As(err, &br):
		status, msg = http.StatusBadRequest, br.msg
	case errors.As(err, &iv):
		status, msg = http.StatusBadRequest, iv.Msg
	case errors.As(err, &nf):
		status, msg = http.StatusNotFound, nf.Msg
	case errors.As(err, &rf):
		status, msg = http.StatusConflict, rf.Msg
	default:
		s.logger.Error("console: page failed", slog.String("route", r.Pattern), slog.String("error", err.Error()))
	}
	s.render(w, status, "error", pageData{Title: http.StatusText(status), User: p, Data: errorPage{msg, back}})
}

func (s *Server) pageRoutes(mux *http.ServeMux) {
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
	s.reconcileRoutes(mux) // its API, with the page
	mux.HandleFunc("/console/", s.page(false, func(w http.ResponseWriter, r *http.Request, p principal) {
		s.render(w, http.StatusNotFound, "error", pageData{Title: "Not found", User: &p, Data: errorPage{"No such page.", "/console/"}})
	}))
}

// page requires a signed-in session, and for act the operator role; it
// sends everyone else to the sign-in form.
func (s *Server) page(act bool, h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = fromConsole(r)
		p, _, ok := s.session(r)
		if !ok {
			securityHeaders(w)
			http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
			return
		}
		if act && !p.Operator() {
			s.render(w, http.StatusForbidden, "error", pageData{Title: "Forbidden", User: &p,
				Data: errorPage{p.Name + " is a viewer; acting needs the operator role.", "/console/"}})
			return
		}
		h(w, r.WithContext(claim.WithActor(r.Context(), p.Name)), p)
	}
}
