package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// maxAuditFilterLen bounds each audit filter.
const maxAuditFilterLen = 512

// auditActions are the actions the audit page's filter offers.
var auditActions = []string{operator.ActionRetry, operator.ActionBulkRetry, operator.ActionPause, operator.ActionResume,
	operator.ActionSignIn, operator.ActionFailedSignIn, operator.ActionSignOut, operator.ActionEndSessions}

// parseAuditFilter reads the audit's actor, action and target filters,
// each matched exactly.
func parseAuditFilter(get func(string) string) (claim.AuditFilter, error) {
	var f claim.AuditFilter
	for _, k := range []struct {
		key string
		dst *string
	}{{"actor", &f.Actor}, {"action", &f.Action}, {"target", &f.Target}} {
		v := get(k.key)
		if len(v) > maxAuditFilterLen || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return f, bad("%s: at most %d characters of text without control characters", k.key, maxAuditFilterLen)
		}
		*k.dst = v
	}
	return f, nil
}

type auditPage struct {
	Entries []auditRow
	Filter  claim.AuditFilter
	Actions []string
	Next    string
}

// auditRow is an audit row as the page shows it: its target's page, and
// the address a sign-in came from.
type auditRow struct {
	claim.AuditRow
	Link   string
	Source string
}

func (s *Server) auditPageOf(ctx context.Context, f claim.AuditFilter, limit int, pos *claim.AuditPosition) (auditPage, error) {
	entries, next, err := s.listAudit(ctx, f, limit, pos)
	if err != nil {
		return auditPage{}, err
	}
	d := auditPage{Filter: f, Actions: auditActions}
	for _, e := range entries {
		row := auditRow{AuditRow: e, Link: auditLink(e.Action, e.Target)}
		var detail struct {
			Source string `json:"source"`
		}
		if json.Unmarshal(e.Detail, &detail) == nil {
			row.Source = detail.Source
		}
		d.Entries = append(d.Entries, row)
	}
	if next != "" {
		v := url.Values{"cursor": {next}}
		for k, val := range map[string]string{"actor": f.Actor, "action": f.Action, "target": f.Target} {
			if val != "" {
				v.Set(k, val)
			}
		}
		d.Next = "/console/audit?" + v.Encode()
	}
	return d, nil
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
		var f claim.AuditFilter
		if f, err = parseAuditFilter(q.Get); err == nil {
			var d auditPage
			if d, err = s.auditPageOf(r.Context(), f, limit, pos); err == nil {
				s.render(w, http.StatusOK, "audit", pageData{Title: "Audit", User: &p, Data: d, Unavailable: s.unavailable(r)})
				return
			}
		}
	}
	s.pageError(w, r, &p, err, "/console/audit")
}
