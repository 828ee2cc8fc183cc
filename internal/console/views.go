package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// ago says how long before now t was, as a person would: "just now",
// "3 min ago", "5 h ago", "2 days ago" ("in 3 min" for a time ahead).
func ago(t, now time.Time) string {
	d := now.Sub(t)
	ahead := d < 0
	if ahead {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		s = strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	if ahead {
		return "in " + s
	}
	return s + " ago"
}

func agoPtr(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return ago(*t, now)
}

// auditLink is where an audit row's target is shown: a retried claim's
// page, a route on the routes page, the failed claims of a bulk retry; ""
// for a target that is no page.
func auditLink(action, target string) string {
	switch action {
	case operator.ActionRetry:
		if provider, id, ok := strings.Cut(target, "/"); ok && provider != "" && id != "" {
			return claimURL(provider, id)
		}
	case operator.ActionPause, operator.ActionResume:
		if nameRE.MatchString(target) {
			return "/console/routes#route-" + target
		}
	case operator.ActionBulkRetry:
		return "/console/claims?status=failed"
	}
	if strings.HasPrefix(action, "breaker") && nameRE.MatchString(target) {
		return "/console/routes#route-" + target
	}
	return ""
}

// pretty is text indented when it is JSON, else as it is.
func pretty(text string) string {
	var buf bytes.Buffer
	if json.Valid([]byte(text)) && json.Indent(&buf, []byte(text), "", "  ") == nil {
		return buf.String()
	}
	return text
}

// headerLines writes headers one "Name: value" a line, by name.
func headerLines(b *strings.Builder, h map[string][]string) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			b.WriteString(name + ": " + v + "\n")
		}
	}
}

// fullAttempt is a as an operator reads it: the request as HTTP would
// write it (its body, the first 2 KiB kept, after a blank line), the
// answer's headers so, and its body pretty-printed.
func fullAttempt(a claim.AttemptRecord) *attemptFull {
	f := &attemptFull{}
	if a.Request != nil {
		var b strings.Builder
		b.WriteString(a.Request.Method + " " + a.Request.URL + "\n")
		headerLines(&b, a.Request.Headers)
		if a.Request.Body != nil && *a.Request.Body != "" {
			b.WriteString("\n" + pretty(*a.Request.Body) + "\n")
		}
		f.Request = b.String()
	}
	if a.ResponseHeaders != nil {
		var b strings.Builder
		headerLines(&b, a.ResponseHeaders)
		f.ResponseHeaders = b.String()
	}
	if a.Response != nil {
		f.Response = pretty(*a.Response)
	}
	return f
}

// runsOf says, by route, the delivery's latest attempt and its place in
// its run of attempts: after a retry, attempt 4 is 2 of 2 of its run.
func runsOf(ds []deliveryView, attempts map[string][]claim.AttemptRecord) map[string]string {
	out := map[string]string{}
	for _, d := range ds {
		as := attempts[d.Route]
		if len(as) == 0 {
			continue
		}
		last := as[len(as)-1]
		s := "attempt " + strconv.Itoa(last.Attempt)
		if last.RunAttempt != nil && last.RunMax != nil {
			s += " · " + strconv.Itoa(*last.RunAttempt) + " of " + strconv.Itoa(*last.RunMax) + " in this run"
		}
		out[d.Route] = s
	}
	return out
}

// destination is a route's URL as the console shows it: a password in it
// masked.
func destination(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

type pauseConfirm struct {
	Route routeView
}

// handlePauseConfirmPage asks before a route is paused: its deliveries
// stop on every worker until it is resumed.
func (s *Server) handlePauseConfirmPage(w http.ResponseWriter, r *http.Request, p principal) {
	if v, ok := s.confirmRoute(w, r, p); ok {
		s.render(w, http.StatusOK, "pauseconfirm", pageData{Title: "Pause " + v.Route + "?", User: &p, Data: pauseConfirm{v}})
	}
}

// confirmRoute finds the route a confirmation page is about, from the
// path; it answers the error page itself (a bad name, no such route, or
// its cell unreadable) and returns false then.
func (s *Server) confirmRoute(w http.ResponseWriter, r *http.Request, p principal) (routeView, bool) {
	name, err := pathRoute(r)
	if err != nil {
		s.pageError(w, r, &p, err, "/console/routes")
		return routeView{}, false
	}
	views, err := s.routeViews(r.Context())
	if err != nil {
		s.pageError(w, r, &p, err, "/console/routes")
		return routeView{}, false
	}
	for _, v := range views {
		if v.Route == name {
			return v, true
		}
	}
	if cell := s.cfg.RouteCell(name); slices.Contains(s.unavailable(r), cell) {
		s.pageError(w, r, &p, &cellDownError{cell: cell, err: errors.New("its routes could not be read")}, "/console/routes")
		return routeView{}, false
	}
	s.pageError(w, r, &p, &operator.NotFoundError{Msg: "No route " + strconv.Quote(cut(name, 64)) + " in the configuration."}, "/console/routes")
	return routeView{}, false
}
