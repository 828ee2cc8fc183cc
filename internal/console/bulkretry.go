package console

// Bulk retry, in the operator API (POST /api/v1/retry) and the console (a
// dry run, a confirmation, the retry).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// bulkBody is POST /api/v1/retry's body: the list filters, force, and
// dry_run, which is required so that no one reopens claims by omission;
// matched and as_of, together, are a dry run's answer, which the retry
// then reopens no more than (see operator.Confirmed).
type bulkBody struct {
	Status      string `json:"status"`
	Provider    string `json:"provider"`
	Route       string `json:"route"`
	Type        string `json:"type"`
	EventID     string `json:"event_id"`
	BusinessKey string `json:"business_key"`
	Since       string `json:"since"`
	Before      string `json:"before"`
	Force       bool   `json:"force"`
	DryRun      *bool  `json:"dry_run"`
	Matched     *int   `json:"matched"`
	AsOf        string `json:"as_of"`
}

// confirmed is the dry run a bulk retry names: matched and as_of, both
// or neither (nil).
func confirmed(matched *int, asOf string) (*operator.Confirmed, error) {
	if matched == nil && asOf == "" {
		return nil, nil
	}
	if matched == nil || *matched < 0 {
		return nil, bad("matched: a dry run's count is required with as_of")
	}
	at, err := time.Parse(time.RFC3339Nano, asOf)
	if err != nil {
		return nil, bad("as_of: a dry run's as_of is required with matched")
	}
	return &operator.Confirmed{Matched: *matched, AsOf: at}, nil
}

func (b *bulkBody) get(key string) string {
	return map[string]string{"status": b.Status, "provider": b.Provider, "route": b.Route, "type": b.Type,
		"event_id": b.EventID, "business_key": b.BusinessKey, "since": b.Since, "before": b.Before}[key]
}

func (s *Server) handleBulkRetry(w http.ResponseWriter, r *http.Request, p principal) {
	var body bulkBody
	if err := decodeBody(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.DryRun == nil {
		s.fail(w, r, bad("dry_run: required: true counts the claims the filters match, false reopens them"))
		return
	}
	f, err := parseFilters(body.get)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := confirmed(body.Matched, body.AsOf)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.actions.BulkRetry(r.Context(), f, body.Force, *body.DryRun, c, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// bulkConfirm is the bulk retry's confirmation page.
type bulkConfirm struct {
	Matched int
	// AsOf is the dry run's time, RFC 3339.
	AsOf    string
	Filters []filterField
	Back    string
	// Note says why the confirmation is asked again; empty the first time.
	Note string
}

type filterField struct{ Name, Value string }

// handleBulkConfirmPage counts, as a dry run of POST /api/v1/retry does,
// the failed claims the list's filters match, and asks to confirm.
func (s *Server) handleBulkConfirmPage(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" {
			q.Del(k)
		}
	}
	q.Del("limit")
	back := "/console/claims?" + filterQuery(q).Encode()
	f, err := parseList(q)
	if err != nil {
		s.pageError(w, r, &p, err, back)
		return
	}
	f.Status = claim.Failed
	if q.Get("status") != "" && q.Get("status") != string(claim.Failed) {
		s.pageError(w, r, &p, bad("status: only failed claims can be retried in bulk"), back)
		return
	}
	res, err := s.actions.BulkRetry(r.Context(), f, false, true, nil, nil)
	if err != nil {
		s.pageError(w, r, &p, err, back)
		return
	}
	s.renderBulkConfirm(w, http.StatusOK, p, f, res.Matched, *res.AsOf, back, "")
}

// renderBulkConfirm renders the confirmation of a bulk retry of the claims
// f matches, of which the dry run at asOf counted matched; the form
// carries both, so that the retry reopens no more than it counted. note,
// when set, says why the confirmation is asked again.
func (s *Server) renderBulkConfirm(w http.ResponseWriter, status int, p principal, f claim.Search, matched int, asOf time.Time, back, note string) {
	d := bulkConfirm{Matched: matched, AsOf: asOf.UTC().Format(time.RFC3339Nano), Back: back, Note: note}
	for _, k := range filterKeys {
		if v := filterValues(f).Get(k); v != "" {
			d.Filters = append(d.Filters, filterField{k, v})
		}
	}
	s.render(w, status, "bulkconfirm", pageData{Title: "Confirm bulk retry", User: &p, Data: d})
}

// handleBulkRetryPage reopens the failed claims the confirmed filters
// match, as POST /api/v1/retry does (and audited as it is).
func (s *Server) handleBulkRetryPage(w http.ResponseWriter, r *http.Request, p principal) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.pageError(w, r, &p, bad("the form could not be read"), "/console/claims")
		return
	}
	f, err := parseFilters(r.PostForm.Get)
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims")
		return
	}
	back := "/console/claims?" + filterValues(f).Encode()
	matched, err := strconv.Atoi(r.PostForm.Get("matched"))
	if err != nil {
		s.pageError(w, r, &p, bad("matched: the confirmation's count is missing; confirm again"), back)
		return
	}
	c, err := confirmed(&matched, r.PostForm.Get("as_of"))
	if err != nil {
		s.pageError(w, r, &p, err, back)
		return
	}
	res, err := s.actions.BulkRetry(r.Context(), f, r.PostForm.Get("force") == "true", false, c, nil)
	var changed *operator.ChangedError
	if errors.As(err, &changed) {
		s.renderBulkConfirm(w, http.StatusConflict, p, f, changed.Matched, changed.AsOf, back,
			fmt.Sprintf("Nothing was reopened: the confirmation counted %s, and the filters match %d now.",
				operator.Plural(changed.Confirmed, "failed claim", "failed claims"), changed.Matched))
		return
	}
	if err != nil {
		s.pageError(w, r, &p, err, "/console/claims?"+filterValues(f).Encode())
		return
	}
	v := filterValues(f)
	v.Set("bulk_matched", strconv.Itoa(res.Matched))
	v.Set("bulk_reopened", strconv.Itoa(res.Reopened))
	http.Redirect(w, r, "/console/claims?"+v.Encode(), http.StatusSeeOther)
}

// bulkFlash is the note a finished bulk retry leaves on the list.
func bulkFlash(q url.Values) string {
	matched, err1 := strconv.Atoi(q.Get("bulk_matched"))
	reopened, err2 := strconv.Atoi(q.Get("bulk_reopened"))
	if err1 != nil || err2 != nil || matched < 0 || reopened < 0 {
		return ""
	}
	return "Bulk retry: " + operator.Plural(reopened, "claim", "claims") + " reopened of " + strconv.Itoa(matched) + " matched."
}
