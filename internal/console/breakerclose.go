package console

// Closing a route's circuit by hand in the console: a confirmation that
// tells the circuit's story, the close, and the note it leaves on the
// routes page.

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/hookgate/hookgate/internal/operator"
)

// breakerConfirm is the confirmation page of a circuit's close.
type breakerConfirm struct {
	Route routeView
}

// handleBreakerConfirmPage asks before a route's circuit is closed by
// hand: every worker sends to it again, its held deliveries at once.
func (s *Server) handleBreakerConfirmPage(w http.ResponseWriter, r *http.Request, p principal) {
	if v, ok := s.confirmRoute(w, r, p); ok {
		s.render(w, http.StatusOK, "breakerconfirm", pageData{Title: "Close the circuit of " + v.Route + "?", User: &p, Data: breakerConfirm{v}})
	}
}

// handleBreakerClosePage closes a route's circuit, as POST
// /api/v1/routes/{name}/breaker/close does, and goes back to the routes
// page with what it did (breakerFlash).
func (s *Server) handleBreakerClosePage(w http.ResponseWriter, r *http.Request, p principal) {
	name, err := pathRoute(r)
	var was bool
	var released int
	if err == nil {
		was, released, err = s.actions.CloseBreaker(r.Context(), name)
	}
	if err != nil {
		s.pageError(w, r, &p, err, "/console/routes")
		return
	}
	q := url.Values{"closed": {name}}
	if was {
		q.Set("released", strconv.Itoa(released))
	}
	http.Redirect(w, r, "/console/routes?"+q.Encode(), http.StatusSeeOther)
}

// breakerFlash is the note a close leaves on the routes page: closed names
// a configured route, and released, when the circuit was open, how many
// held deliveries the close let go. Anything else (a route not in the
// configuration, a count that is not one) leaves no note.
func breakerFlash(q url.Values, routes []string) string {
	name := q.Get("closed")
	if name == "" || !slices.Contains(routes, name) {
		return ""
	}
	if q.Get("released") == "" {
		return "The circuit of route " + name + " was closed already."
	}
	n, err := strconv.Atoi(q.Get("released"))
	if err != nil || n < 0 {
		return ""
	}
	return "Circuit of route " + name + " closed; " + operator.Plural(n, "held delivery", "held deliveries") + " released."
}
