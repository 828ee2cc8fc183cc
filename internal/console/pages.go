package console

import (
	"bytes"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

//go:embed templates/*.html static/*
var files embed.FS

// pageNames are the console's page templates, each rendered in layout.html.
var pageNames = []string{"signin", "error", "overview", "claims", "claim", "confirm", "routes", "audit", "bulkconfirm", "pauseconfirm", "breakerconfirm", "reconcile"}

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
	// Unavailable names the cells that could not be read: the page shows
	// the others', under a banner naming these.
	Unavailable []string
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

// pageError renders err as a page, with the status and message statusOf
// maps it to, and a link back.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, p *principal, err error, back string) {
	status, msg := s.statusOf(w, r, err)
	title := http.StatusText(status)
	if status == http.StatusServiceUnavailable {
		title = "Unavailable"
	}
	s.render(w, status, "error", pageData{Title: title, User: p, Data: errorPage{msg, back}})
}

// page requires a signed-in session, and for act the operator role; it
// sends everyone else to the sign-in form.
func (s *Server) page(act bool, h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = fromConsole(r)
		r = r.WithContext(withUnavailable(r.Context()))
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
