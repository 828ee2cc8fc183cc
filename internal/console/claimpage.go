package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

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
	res, err := s.actions.Retry(r.Context(), provider, eventID, r.PostForm.Get("force") == "true")
	if err != nil {
		s.pageError(w, r, &p, err, claimURL(provider, eventID))
		return
	}
	http.Redirect(w, r, claimURL(provider, eventID)+"?retried="+strconv.Itoa(res.Deliveries), http.StatusSeeOther)
}
