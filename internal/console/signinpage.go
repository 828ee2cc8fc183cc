package console

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

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
	if err := operator.Audit(claim.WithActor(r.Context(), p.Name), s.audit, s.logger, claim.AuditEntry{Action: operator.ActionSignIn,
		Detail: map[string]string{"via": "console", "source": sourceOf(r.Context())}}); err != nil {
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
		if err := operator.Audit(claim.WithActor(r.Context(), p.Name), s.audit, s.logger, claim.AuditEntry{Action: operator.ActionSignOut}); err != nil {
			s.logger.Error("console: auditing a sign-out", slog.String("error", err.Error()))
		}
	}
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}
