package console

import (
	"net/http"
)

func (s *Server) handleRoutesPage(w http.ResponseWriter, r *http.Request, p principal) {
	views, err := s.routeViews(r.Context())
	if err != nil {
		s.pageError(w, r, &p, err, "")
		return
	}
	s.render(w, http.StatusOK, "routes", pageData{Title: "Routes", User: &p, Flash: breakerFlash(r.URL.Query(), s.actions.Routes), Data: views, Unavailable: s.unavailable(r)})
}

func (s *Server) handlePausePage(pause bool) func(http.ResponseWriter, *http.Request, principal) {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		name, err := pathRoute(r)
		switch {
		case err != nil:
		case pause:
			err = s.actions.PauseRoute(r.Context(), name)
		default:
			_, err = s.actions.ResumeRoute(r.Context(), name)
		}
		if err != nil {
			s.pageError(w, r, &p, err, "/console/routes")
			return
		}
		http.Redirect(w, r, "/console/routes", http.StatusSeeOther)
	}
}
