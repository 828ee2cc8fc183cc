package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookgate/hookgate/internal/claim"
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
	name := c.Param("provider")
	outcome, eventID, err := s.ingest(c, name)
	status := http.StatusOK
	if err != nil {
		status = statusOf(err)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	} else if status >= 400 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("provider", name),
		slog.String("event_id", eventID),
		slog.String("result", outcome),
		slog.Int("status", status),
		slog.Duration("latency", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.logger.LogAttrs(c.Request().Context(), level, "webhook", attrs...)
	if err != nil {
		// Answered here rather than returned, so that the metrics
		// middleware records the status actually sent.
		s.handleError(err, c)
	}
	return nil
}

// ingest does the work of handleWebhook and names its outcome for the log.
func (s *Server) ingest(c echo.Context, name string) (outcome, eventID string, err error) {
	p, ok := s.providers[name]
	if !ok {
		return "unknown_provider", "", errUnknownProvider
	}

	req := c.Request()
	if req.ContentLength > s.cfg.Ingest.MaxBodyBytes {
		return "too_large", "", errTooLarge
	}
	// MaxBytesReader also stops chunked bodies that run over the limit.
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, s.cfg.Ingest.MaxBodyBytes))
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

	routes := s.cfg.MatchingRoutes(name, ev.Type)
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Name
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.Ingest.ClaimTimeout.D())
	defer cancel()
	res, err := s.claims.Claim(ctx, claim.Event{
		Provider:    name,
		ID:          ev.ID,
		Type:        ev.Type,
		ObjectID:    ev.ObjectID,
		ContentType: req.Header.Get(echo.HeaderContentType),
		Payload:     body,
		// Computed only now, from verified bytes.
		BusinessKeys: businessKeys(routes, ev.Type, req.Header, body),
	}, names, p.reopen)
	if err != nil {
		return "unavailable", ev.ID, &unavailableError{err: err}
	}

	for _, r := range res.Skipped {
		s.metrics.businessDuplicates.WithLabelValues(r).Inc()
	}
	switch res.Outcome {
	case claim.Claimed, claim.ClaimedIgnored:
		s.metrics.claims.WithLabelValues(name, ev.Type).Inc()
	case claim.Duplicate:
		s.metrics.duplicates.WithLabelValues(name).Inc()
	case claim.Reopened:
		s.metrics.reopened.WithLabelValues(name).Inc()
	}
	outcome = map[claim.Outcome]string{
		claim.Claimed: "claimed", claim.ClaimedIgnored: "ignored",
		claim.Duplicate: "duplicate", claim.Reopened: "reopened",
	}[res.Outcome]
	return outcome, ev.ID, c.JSON(http.StatusOK, ack{Received: true, Duplicate: res.Duplicate()})
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 503 while the database does not answer, so a load
// balancer can route around an ingest that could only say 503 anyway.
func (s *Server) handleReadyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		s.logger.Warn("readiness check failed", slog.String("error", err.Error()))
		return c.JSON(http.StatusServiceUnavailable, errorBody{Error: "database unreachable"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
