package console

import "net/http"

// handleEndAllSessions ends every session of the signed-in user, on every
// replica and every browser, this one included (a password that may have
// leaked, a laptop left signed in), audited as end_sessions; the browser
// goes to the sign-in form. A viewer may end its own. Like every form it
// is refused from another origin by the listener.
func (s *Server) handleEndAllSessions(w http.ResponseWriter, r *http.Request, p principal) {
	if err := s.endAllSessions(w, r, p); err != nil {
		s.pageError(w, r, &p, err, "/console/")
		return
	}
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}
