package console

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

//go:embed templates/*.html static/*
var files embed.FS

// pageNames are the console's page templates, each rendered in layout.html.
var pageNames = []string{"signin", "error", "overview", "claims", "claim", "confirm", "routes", "audit", "bulkconfirm", "pauseconfirm"}

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

// pageError renders err as a page: 400, 404 or 409 with its message, else
// 500 without it.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, p *principal, err error, back string) {
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
		h(w, r, p)
	}
}

func (s *Server) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.session(r); ok {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "signin", pageData{Title: "Sign in"})
}

func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	r = fromConsole(r)
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.render(w, http.StatusBadRequest, "signin", pageData{Title: "Sign in", Data: "The form could not be read."})
		return
	}
	p, err := s.checkPassword(r, r.PostForm.Get("name"), r.PostForm.Get("password"), "console")
	var locked errLocked
	switch {
	case errors.As(err, &locked):
		w.Header().Set("Retry-After", strconv.Itoa(int(locked.wait.Seconds())+1))
		s.render(w, http.StatusTooManyRequests, "signin", pageData{Title: "Sign in", Data: "Too many failed sign-ins; try again in a minute."})
		return
	case err != nil:
		s.render(w, http.StatusUnauthorized, "signin", pageData{Title: "Sign in", Data: "Wrong name or password."})
		return
	}
	if err := s.startSession(w, r, p); err != nil {
		s.pageError(w, r, nil, err, "/console/sign-in")
		return
	}
	if err := operator.Record(r.Context(), s.db, s.logger, p.Name, operator.ActionSignIn, "",
		map[string]string{"via": "console", "source": sourceOf(r.Context())}); err != nil {
		s.logger.Error("console: auditing a sign-in", slog.String("error", err.Error()))
	}
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) {
	r = fromConsole(r)
	p, token, ok := s.session(r)
	if ok {
		if err := s.endSession(w, r, token); err != nil {
			s.pageError(w, r, &p, err, "/console/")
			return
		}
		if err := operator.Record(r.Context(), s.db, s.logger, p.Name, operator.ActionSignOut, "", nil); err != nil {
			s.logger.Error("console: auditing a sign-out", slog.String("error", err.Error()))
		}
	}
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}

// statusCount is one cell of the overview.
type statusCount struct {
	Status string
	Count  int
}

type overview struct {
	Statuses []statusCount
	Routes   []routeView
	// Charts are the routes' activity over the window, in Routes' order.
	Charts []routeChart
}

func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request, p principal) {
	var o overview
	now := time.Now()
	counts, err := s.store.StatusCounts(r.Context(), now.Add(-24*time.Hour))
	if err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	for _, st := range []claim.Status{claim.Failed, claim.Processing, claim.Completed, claim.Ignored} {
		o.Statuses = append(o.Statuses, statusCount{string(st), counts[st]})
	}
	if o.Routes, err = s.routeViews(r.Context()); err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	// Open circuits first, then paused routes, then failing ones.
	slices.SortStableFunc(o.Routes, func(a, b routeView) int {
		if ao, bo := a.BreakerOpen(), b.BreakerOpen(); ao != bo {
			return map[bool]int{true: -1, false: 1}[ao]
		}
		if a.Paused != b.Paused {
			return map[bool]int{true: -1, false: 1}[a.Paused]
		}
		return b.Failed - a.Failed
	})
	names := make([]string, len(o.Routes))
	for i, rv := range o.Routes {
		names[i] = rv.Route
	}
	if o.Charts, err = s.routeCharts(r.Context(), names, now); err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	s.render(w, http.StatusOK, "overview", pageData{Title: "Overview", User: &p, Data: o})
}

type claimPage struct {
	Claim   claimView
	Payload string
	// Runs says, by route, the delivery's latest attempt and its place in
	// its run ("attempt 4 · 2 of 2 in this run").
	Runs map[string]string
	// Timeline is the claim's attempt history, by route and attempt.
	Timeline []timelineRow
}

// timelineRow is one attempt as the claim page shows it.
type timelineRow struct {
	Route   string
	Attempt int
	// Run is the attempt's place in its run of attempts ("2 of 2"); ""
	// when not recorded.
	Run     string
	Started time.Time
	// Duration is in milliseconds; Status "-" when no answer came, Error
	// "" on success.
	Duration int64
	Status   string
	Error    string
	// Full is what an operator sees of the attempt: what was sent and
	// what came back; nil for a viewer.
	Full *attemptFull
}

// attemptFull is an attempt in full, each part pretty-printed; "" where
// none was recorded (or retention cleared it).
type attemptFull struct {
	Request, ResponseHeaders, Response string
}

// timeline flattens attempts into rows in the order of the deliveries;
// full says whether requests and answers are shown (operators).
func timeline(ds []deliveryView, attempts map[string][]claim.AttemptRecord, full bool) []timelineRow {
	var rows []timelineRow
	for _, d := range ds {
		for _, a := range attempts[d.Route] {
			row := timelineRow{Route: d.Route, Attempt: a.Attempt, Started: a.StartedAt, Duration: a.DurationMS, Status: "-"}
			if a.RunAttempt != nil && a.RunMax != nil {
				row.Run = strconv.Itoa(*a.RunAttempt) + " of " + strconv.Itoa(*a.RunMax)
			}
			if a.StatusCode != nil {
				row.Status = strconv.Itoa(*a.StatusCode)
			}
			if a.Error != nil {
				row.Error = reasonOnly(*a.Error)
			}
			if full {
				row.Full = fullAttempt(a)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// prettyPayload is the payload as the claim page shows it: indented JSON,
// else the text, else base64 (every form escaped by the template).
func prettyPayload(body []byte, encoding string) string {
	switch {
	case len(body) == 0:
		return ""
	case encoding == "" && json.Valid(body):
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			return buf.String()
		}
	case encoding == "" && utf8.Valid(body):
		return string(body)
	}
	return "(" + strconv.Itoa(len(body)) + " bytes" + map[bool]string{true: ", Content-Encoding " + encoding, false: ""}[encoding != ""] +
		"; base64)\n" + base64.StdEncoding.EncodeToString(body)
}

func (s *Server) handleClaimPage(w http.ResponseWriter, r *http.Request, p principal) {
	provider, eventID, err := pathClaim(r)
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	c, ds, err := s.store.Get(r.Context(), provider, eventID)
	if errors.Is(err, claim.ErrNotFound) {
		err = &operator.NotFoundError{Msg: "No claim " + cut(provider, 64) + "/" + cut(eventID, 255) + "."}
	}
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	d := claimPage{Claim: claimView{Record: withoutAnswers(c), Deliveries: s.deliveryViews(ds)}}
	// Viewers never see requests or answers: they are not even read.
	attempts, err := s.store.Attempts(r.Context(), provider, eventID, p.Operator())
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	d.Timeline = timeline(d.Claim.Deliveries, attempts, p.Operator())
	d.Runs = runsOf(d.Claim.Deliveries, attempts)
	if p.Operator() {
		body, encoding, err := s.store.Payload(r.Context(), provider, eventID)
		if err != nil {
			s.pageError(w, r, &p, err, "/console/claims")
			return
		}
		d.Payload = prettyPayload(body, encoding)
	}
	flash := ""
	if n, err := strconv.Atoi(r.URL.Query().Get("retried")); err == nil && n >= 0 {
		flash = "Retry queued: " + operator.Plural(n, "delivery", "deliveries") + " reopened."
	}
	s.render(w, http.StatusOK, "claim", pageData{Title: "Claim " + cut(provider+"/"+eventID, 80), User: &p, Flash: flash, Data: d})
}

type confirmPage struct{ Provider, EventID string }

func (s *Server) handleConfirmPage(w http.ResponseWriter, r *http.Request, p principal) {
	provider, eventID, err := pathClaim(r)
	if err == nil {
		_, _, err = s.store.Get(r.Context(), provider, eventID)
	}
	if err != nil {
		if errors.Is(err, claim.ErrNotFound) {
			err = &operator.NotFoundError{Msg: "No claim " + cut(provider, 64) + "/" + cut(eventID, 255) + "."}
		}
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	s.render(w, http.StatusOK, "confirm", pageData{Title: "Confirm retry", User: &p, Data: confirmPage{provider, eventID}})
}

func (s *Server) handleRetryPage(w http.ResponseWriter, r *http.Request, p principal) {
	provider, eventID, err := pathClaim(r)
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.pageError(w, r, &p, bad("the form could not be read"), claimURL(provider, eventID))
		return
	}
	res, err := s.actions.Retry(r.Context(), p.Name, provider, eventID, r.PostForm.Get("force") == "true")
	if err != nil {
		s.pageError(w, r, &p, err, claimURL(provider, eventID))
		return
	}
	http.Redirect(w, r, claimURL(provider, eventID)+"?retried="+strconv.Itoa(res.Deliveries), http.StatusSeeOther)
}

func (s *Server) handleRoutesPage(w http.ResponseWriter, r *http.Request, p principal) {
	views, err := s.routeViews(r.Context())
	if err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	s.render(w, http.StatusOK, "routes", pageData{Title: "Routes", User: &p, Data: views})
}

func (s *Server) handlePausePage(pause bool) func(http.ResponseWriter, *http.Request, principal) {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		name, err := pathRoute(r)
		switch {
		case err != nil:
		case pause:
			err = s.actions.PauseRoute(r.Context(), p.Name, name)
		default:
			_, err = s.actions.ResumeRoute(r.Context(), p.Name, name)
		}
		if err != nil {
			s.pageError(w, r, &p, err, "/console/routes")
			return
		}
		http.Redirect(w, r, "/console/routes", http.StatusSeeOther)
	}
}

func (s *Server) handleBreakerClosePage(w http.ResponseWriter, r *http.Request, p principal) {
	if _, err := s.actions.CloseBreaker(r.Context(), p.Name, r.PathValue("name")); err != nil {
		s.pageError(w, r, &p, err, "/console/routes")
		return
	}
	http.Redirect(w, r, "/console/routes", http.StatusSeeOther)
}

func (s *Server) handleAuditPage(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" {
			q.Del(k)
		}
	}
	limit, pos, err := parseAudit(q.Get)
	if err == nil {
		var f operator.AuditFilter
		if f, err = parseAuditFilter(q.Get); err == nil {
			var d auditPage
			if d, err = s.auditPageOf(r.Context(), f, limit, pos); err == nil {
				s.render(w, http.StatusOK, "audit", pageData{Title: "Audit", User: &p, Data: d})
				return
			}
		}
	}
	s.pageError(w, r, &p, err, "/console/audit")
}
