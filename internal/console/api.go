package console

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/operator"
)

// deliveryView is one delivery as the API and the console show it: the
// view `worker claims show` prints, so that the two cannot drift. The name
// stays for the pages and their templates.
type deliveryView = claim.DeliveryView

// claimView is a claim with its deliveries, as `claims export` writes it
// (without the payload).
type claimView = claim.View

// claimDetail is one claim as GET /api/v1/claims/{provider}/{event_id}
// answers it: for an operator with its payload.
type claimDetail struct {
	claimView
	Payload     []byte          `json:"payload,omitempty"`
	PayloadJSON json.RawMessage `json:"payload_json,omitempty"`
}

func (s *Server) deliveryViews(ds []claim.Delivery) []deliveryView {
	out := claim.AppendDeliveryViews(make([]deliveryView, 0, len(ds)), ds, s.cfg.MaxAttempts)
	for i := range out {
		out[i].LastError = reasonOnly(out[i].LastError)
	}
	return out
}

// api authenticates, and for act requires an operator, before h.
func (s *Server) api(act bool, h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(withUnavailable(withSource(claim.WithOrigin(r.Context(), claim.OriginAPI), r)))
		p, ok := s.apiAuth(w, r, act)
		if !ok {
			return
		}
		h(w, r.WithContext(claim.WithActor(r.Context(), p.Name)), p)
	}
}

// fail answers err as JSON, with the status and message statusOf maps it
// to; a bulk retry whose dry run no longer holds also gets the new count.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.statusOf(w, r, err)
	var ch *operator.ChangedError
	if errors.As(err, &ch) {
		writeJSON(w, status, map[string]any{"error": msg, "matched": ch.Matched, "as_of": ch.AsOf})
		return
	}
	apiError(w, status, msg)
}

func (s *Server) handleListClaims(w http.ResponseWriter, r *http.Request, _ principal) {
	f, err := parseList(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pg, err := s.listClaims(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.withCells(r, map[string]any{"claims": pg.claims, "next_cursor": pg.next, "prev_cursor": pg.prev}))
}

// detail reads one claim; for an operator with its payload.
func (s *Server) detail(ctx context.Context, provider, eventID string, p principal) (claimDetail, error) {
	c, ds, err := s.store.Get(ctx, provider, eventID)
	if errors.Is(err, claim.ErrNotFound) {
		return claimDetail{}, &operator.NotFoundError{Msg: "no claim " + cut(provider, 64) + "/" + cut(eventID, 255)}
	}
	if err != nil {
		return claimDetail{}, err
	}
	d := claimDetail{claimView: claimView{Record: withoutAnswers(c), Deliveries: s.deliveryViews(ds)}}
	// Viewers never see responses: they are not even read.
	attempts, err := s.store.Attempts(ctx, provider, eventID, p.Operator())
	if err != nil {
		return claimDetail{}, err
	}
	for i := range d.Deliveries {
		as := attempts[d.Deliveries[i].Route]
		if as == nil {
			as = []claim.AttemptRecord{}
		}
		attemptsWithoutAnswers(as)
		d.Deliveries[i].Attempts = &as
	}
	if p.Operator() {
		body, encoding, err := s.store.Payload(ctx, provider, eventID)
		if err != nil {
			return claimDetail{}, err
		}
		d.Payload = body
		if encoding == "" && len(body) > 0 && json.Valid(body) {
			d.PayloadJSON = body
		}
	}
	return d, nil
}

func (s *Server) handleGetClaim(w http.ResponseWriter, r *http.Request, p principal) {
	provider, eventID, err := pathClaim(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.detail(r.Context(), provider, eventID, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// decodeBody decodes a small JSON body strictly into v; an empty body
// leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return bad("body: want a JSON object of the documented fields (%s)", cut(err.Error(), 120))
	}
	return nil
}

func (s *Server) handleRetry(w http.ResponseWriter, r *http.Request, p principal) {
	var body struct {
		Force bool `json:"force"`
	}
	provider, eventID, err := pathClaim(r)
	if err == nil {
		err = decodeBody(r, &body)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.actions.Retry(r.Context(), provider, eventID, body.Force)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// routeView is one route as the API lists it, as `worker routes list
// --json` does.
type routeView struct {
	claim.RouteState
	Concurrency int `json:"concurrency"`
	Backlog     int `json:"backlog"`
	// Destination (the URL, a password in it masked) and Events (the
	// type patterns) are for the console's pages.
	Destination string   `json:"-"`
	Method      string   `json:"-"`
	Events      []string `json:"-"`
	// BreakerOn is whether the route has a circuit breaker (breaker: off
	// turns it off).
	BreakerOn bool `json:"breaker_on"`
	// Rate is the route's rate; null when it is not paced.
	Rate *claim.RateInfo `json:"rate"`
}

// rateInfo is rc's rate as shown, with its Retry-After hold.
func rateInfo(rc *config.Rate, heldUntil *time.Time) *claim.RateInfo {
	if rc == nil {
		return nil
	}
	return &claim.RateInfo{Limit: rc.Limit, Per: rc.Per.D().String(), Burst: rc.Burst, HeldUntil: heldUntil}
}

// BreakerOpen reports whether the route's circuit is open or half-open.
func (v routeView) BreakerOpen() bool {
	return v.BreakerOn && v.Breaker.State != claim.BreakerClosed && v.Breaker.State != ""
}

func (s *Server) routeViews(ctx context.Context) ([]routeView, error) {
	states, err := s.store.RouteStates(ctx, s.queues, s.actions.Routes)
	if err != nil {
		return nil, err
	}
	views := make([]routeView, len(states))
	for i, st := range states {
		rc, _ := s.cfg.Route(st.Route) // a route of a cell that could not be read is left out
		views[i] = routeView{RouteState: st, Concurrency: rc.Concurrency, Backlog: st.QueuedJobs(),
			Destination: destination(rc.URL), Method: cmp.Or(rc.Method, http.MethodPost), Events: rc.Events,
			BreakerOn: rc.Breaker.On(), Rate: rateInfo(rc.Rate, st.HeldUntil)}
	}
	return views, nil
}

func (s *Server) handleRoutes(w http.ResponseWriter, r *http.Request, _ principal) {
	views, err := s.routeViews(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.withCells(r, map[string]any{"routes": views}))
}

func (s *Server) handlePause(pause bool) func(http.ResponseWriter, *http.Request, principal) {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		name, err := pathRoute(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if pause {
			if err := s.actions.PauseRoute(r.Context(), name); err != nil {
				s.fail(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"route": name, "paused": true})
			return
		}
		was, err := s.actions.ResumeRoute(r.Context(), name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"route": name, "paused": false, "was_paused": was})
	}
}

// handleBreakerClose closes a route's circuit breaker by hand.
func (s *Server) handleBreakerClose(w http.ResponseWriter, r *http.Request, p principal) {
	name, err := pathRoute(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	was, released, err := s.actions.CloseBreaker(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"route": name, "breaker": claim.BreakerClosed, "was_open": was, "released": released})
}

// parseAudit reads an audit listing's limit and cursor.
func parseAudit(get func(string) string) (int, *claim.AuditPosition, error) {
	limit := defaultLimit
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return 0, nil, bad("limit: must be a whole number from 1 to %d", maxLimit)
		}
		limit = n
	}
	var pos *claim.AuditPosition
	if v := get("cursor"); v != "" {
		var p claim.AuditPosition
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err == nil && len(v) <= maxCursor {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.At.IsZero() {
			return 0, nil, bad("cursor: not one this API handed out")
		}
		pos = &p
	}
	return limit, pos, nil
}

// listAudit reads a page of the audit rows f matches and the next page's
// cursor.
func (s *Server) listAudit(ctx context.Context, f claim.AuditFilter, limit int, pos *claim.AuditPosition) ([]claim.AuditRow, string, error) {
	entries, err := s.auditRows.AuditRows(ctx, f, limit+1, pos)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		last := entries[limit-1]
		b, _ := json.Marshal(claim.AuditPosition{At: last.At, ID: last.ID})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return entries, next, nil
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, _ principal) {
	for k := range r.URL.Query() {
		switch k {
		case "limit", "cursor", "actor", "action", "target":
		default:
			s.fail(w, r, bad("unknown parameter %q: want actor, action, target, limit or cursor", cut(k, 64)))
			return
		}
	}
	limit, pos, err := parseAudit(r.URL.Query().Get)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := parseAuditFilter(r.URL.Query().Get)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, next, err := s.listAudit(r.Context(), f, limit, pos)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.withCells(r, map[string]any{"audit": entries, "next_cursor": next}))
}
