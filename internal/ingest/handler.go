package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/gate"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/verify"
)

// ack is the body of every 2xx answer to a provider.
type ack struct {
	Received  bool `json:"received"`
	Duplicate bool `json:"duplicate"`
}

// handleWebhook is POST /webhooks/:provider. Order matters: nothing touches
// the database before the signature is verified on the raw bytes, and the
// provider hears 200 only after the claim transaction committed.
func (s *Server) handleWebhook(c echo.Context) error {
	start := time.Now()
	// The bound on requests in flight is checked before anything is read,
	// so unverified bodies never hold more than about max_in_flight ×
	// max_body_bytes of memory.
	select {
	case s.inFlight <- struct{}{}:
		s.metrics.inFlight.Inc()
		defer func() {
			<-s.inFlight
			s.metrics.inFlight.Dec()
		}()
	default:
		s.metrics.overloaded.Inc()
		h := c.Response().Header()
		h.Set("Retry-After", "1")
		// The unread body is left behind with the connection.
		h.Set(echo.HeaderConnection, "close")
		s.handleError(errOverloaded, c)
		return nil
	}
	name := c.Param("provider")
	ctx, span := s.tracer.startRequest(c.Request().Context(), c.Request().Header)
	if span != nil {
		c.SetRequest(c.Request().WithContext(ctx))
	}
	result, eventID, err := s.ingest(c, name)
	status := http.StatusOK
	if err != nil {
		status = statusOf(err)
	}
	if _, known := s.providers[name]; known {
		defer endRequest(span, name, eventID, result, status)
	} else {
		defer endRequest(span, "", "", result, status)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	} else if status >= 400 {
		level = slog.LevelWarn
	}
	ctx = c.Request().Context()
	if level == slog.LevelInfo && (!s.logger.Enabled(ctx, level) || !s.lines.Allow(ctx, s.logger, s.now(), result)) {
		return nil
	}
	attrs := []slog.Attr{
		// The path segment is the client's to choose, verified or not.
		slog.String("provider", capLog(name)),
		slog.String("event_id", eventID),
		slog.String("result", result),
		slog.Int("status", status),
		slog.Duration("latency", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.logger.LogAttrs(ctx, level, "webhook", attrs...)
	if err != nil {
		// Answered here rather than returned, so that the metrics
		// middleware records the status actually sent.
		s.handleError(err, c)
	}
	return nil
}

// ingest does the work of handleWebhook and names its result for the log.
func (s *Server) ingest(c echo.Context, name string) (result, eventID string, err error) {
	p, ok := s.providers[name]
	if !ok {
		return "unknown_provider", "", errUnknownProvider
	}

	req := c.Request()
	if req.ContentLength > s.cfg.Ingest.MaxBodyBytes {
		return "too_large", "", errTooLarge
	}
	// MaxBytesReader also stops chunked bodies that run over the limit.
	body, err := readBody(http.MaxBytesReader(c.Response(), req.Body, s.cfg.Ingest.MaxBodyBytes), req.ContentLength)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return "too_large", "", errTooLarge
		}
		return "bad_body", "", errBadBody
	}

	ev, err := p.verifier.Verify(body, req.Header, s.now())
	if err != nil {
		var verr *verify.Error
		if errors.As(err, &verr) && errors.Is(err, verify.ErrUnauthorized) {
			s.metrics.signatureFailures.WithLabelValues(name, verr.Reason).Inc()
			return "unauthorized", "", err
		}
		return "invalid", "", err
	}
	linkCaller(req.Context())

	encoding, err := contentEncoding(req.Header)
	if err != nil {
		return "invalid", "", err
	}
	contentType, err := contentType(req.Header)
	if err != nil {
		return "invalid", "", err
	}

	// The body as the verifier parsed it is shared by filters and keys.
	in := route.NewInput(route.Event{Provider: name, ID: ev.ID, Type: ev.Type}, req.Header, body, ev.Body)
	routes := s.match(req.Context(), in)
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.Ingest.ClaimTimeout.D())
	defer cancel()
	// The jobs carry the request's trace context, not the claim's: each
	// attempt is a child of the request that accepted the event.
	meta := s.tracer.jobMetadata(ctx)
	ctx, span := s.tracer.startClaim(ctx, name, ev.ID, len(routes))
	// The same request a reconciled event is claimed with (gate.Request);
	// its business keys are computed only now, from verified bytes.
	creq := gate.Request(claim.Event{
		Provider:        name,
		ID:              ev.ID,
		Type:            ev.Type,
		ObjectID:        ev.ObjectID,
		ContentType:     contentType,
		ContentEncoding: encoding,
		Payload:         body,
		GuardBody:       p.guardBody,
		JobMetadata:     meta,
	}, routes, in)
	res, err := s.claims.Claim(ctx, creq.Event, creq.Routes, p.reopen)
	if errors.Is(err, claim.ErrUnstorable) {
		// Ingest checks what it stores before the claim; this is the
		// claim's own guard answering for a value that slipped past.
		endClaim(span, "", err)
		return "invalid", ev.ID, errUnstorable
	}
	if err != nil {
		endClaim(span, "", err)
		s.metrics.unavailable.WithLabelValues(name).Inc()
		return "unavailable", ev.ID, &unavailableError{err: err}
	}

	for _, r := range res.Skipped {
		s.metrics.businessDuplicates.WithLabelValues(r).Inc()
	}
	switch res.Decision {
	case claim.Claimed, claim.ClaimedIgnored:
		s.metrics.claims.WithLabelValues(name, p.typeLabel(ev.Type)).Inc()
	case claim.Duplicate:
		s.metrics.duplicates.WithLabelValues(name).Inc()
	case claim.Reopened:
		s.metrics.reopened.WithLabelValues(name).Inc()
	case claim.Replay:
		s.metrics.replays.WithLabelValues(name).Inc()
	}
	result = resultNames[res.Decision]
	endClaim(span, result, nil)
	return result, ev.ID, c.JSON(http.StatusOK, ack{Received: true, Duplicate: res.Duplicate()})
}

// resultNames name a claim's decision in the request's log line.
var resultNames = map[claim.Decision]string{
	claim.Claimed: "claimed", claim.ClaimedIgnored: "ignored",
	claim.Duplicate: "duplicate", claim.Reopened: "reopened", claim.Replay: "replay",
}

// maxLogField bounds every log field taken from an unauthenticated request.
const maxLogField = 256

// capLog cuts s to maxLogField bytes, marking the cut, so that no client can
// make one request cost more than a line of log.
func capLog(s string) string { return sanitize.Cut(s, maxLogField) }

// readBody reads r whole. A body that announces its length is read into a
// buffer of exactly that size (at most max_body_bytes, checked before), so a
// request in flight holds one body's worth of memory, not a doubling
// buffer's; a chunked body grows as it arrives.
func readBody(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength < 0 {
		return io.ReadAll(r)
	}
	body := make([]byte, contentLength)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// maxContentEncoding bounds the Content-Encoding kept with a claim.
const maxContentEncoding = 128

// contentEncoding returns the request's Content-Encoding to keep with the
// claim: "" for none or identity. The signed bytes are the encoded ones, so
// the worker forwards them with the same header, never decoded or relabelled.
func contentEncoding(h http.Header) (string, error) {
	v := strings.Join(h.Values(echo.HeaderContentEncoding), ", ")
	if v == "" || strings.EqualFold(strings.TrimSpace(v), "identity") {
		return "", nil
	}
	if len(v) > maxContentEncoding {
		return "", errBadEncoding
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return "", errBadEncoding
		}
	}
	return v, nil
}

// maxContentType bounds the Content-Type kept with a claim. Media types
// providers send are a few dozen bytes; a multipart boundary fits easily.
const maxContentType = 256

// contentType returns the request's Content-Type to keep with the claim and
// forward. It is held to printable ASCII (and tabs), as media types are: a
// signed request can be resent with any bytes in the header, and one that
// is not text (0xFF, say) could never be stored, so every retry would fail
// the claim again. Such a request is refused with 400 before the claim.
func contentType(h http.Header) (string, error) {
	v := h.Get(echo.HeaderContentType)
	if len(v) > maxContentType {
		return "", errBadContentType
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return "", errBadContentType
		}
	}
	return v, nil
}

// match returns the routes that take a verified event: by type, then by
// filter. A filter that says no, or fails, is counted and (when it failed)
// logged; the route simply gets no delivery.
func (s *Server) match(ctx context.Context, in *route.Input) []*route.Route {
	routes, unmatched := s.table.Match(ctx, in)
	provider, ev := in.Event.Provider, in.Event
	for _, u := range unmatched {
		if u.Err == nil {
			s.metrics.filtered.WithLabelValues(u.Route, filterFalse).Inc()
			continue
		}
		s.metrics.filtered.WithLabelValues(u.Route, filterError).Inc()
		s.logger.LogAttrs(ctx, slog.LevelWarn, "route filter failed; the route does not take the event",
			slog.String("provider", provider), slog.String("event_id", ev.ID), slog.String("route", u.Route),
			slog.String("error", capLog(u.Err.Error())))
	}
	return routes
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 503 while the database does not answer, so a load
// balancer can route around an ingest that could only say 503 anyway.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.cells != nil {
		return s.readyzCells(c)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		s.logger.Warn("readiness check failed", slog.String("error", err.Error()))
		return c.JSON(http.StatusServiceUnavailable, errorBody{Error: "database unreachable"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
