package ingest

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookgate/hookgate/internal/verify"
)

var (
	errUnknownProvider = errors.New("unknown provider")
	errTooLarge        = errors.New("request body exceeds the configured limit")
	errBadBody         = errors.New("request body could not be read")
	errBadEncoding     = errors.New("Content-Encoding header is malformed")
	errBadContentType  = errors.New("Content-Type header must be at most 256 bytes of printable ASCII")
	errUnstorable      = errors.New("the event holds a value that cannot be stored")
	errOverloaded      = errors.New("too many requests in flight; retry later")
)

// unavailableError wraps a failed claim transaction. Its cause (which may
// quote SQL) goes to the log; the provider only hears that it should retry.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

type errorBody struct {
	Error string `json:"error"`
}

// statusOf maps an error kind to the status the contract gives it.
func statusOf(err error) int {
	var he *echo.HTTPError
	var unavailable *unavailableError
	switch {
	case errors.Is(err, errUnknownProvider):
		return http.StatusNotFound
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadBody), errors.Is(err, errBadEncoding), errors.Is(err, errBadContentType),
		errors.Is(err, errUnstorable):
		return http.StatusBadRequest
	case errors.Is(err, errOverloaded):
		return http.StatusServiceUnavailable
	case errors.Is(err, verify.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, verify.ErrInvalid):
		return http.StatusBadRequest
	case errors.As(err, &unavailable):
		return http.StatusServiceUnavailable
	case errors.As(err, &he):
		return he.Code
	}
	return http.StatusInternalServerError
}

// publicMessage is what the client reads: the problem, never SQL, secrets
// or internals.
func publicMessage(err error, status int) string {
	var he *echo.HTTPError
	var unavailable *unavailableError
	switch {
	case errors.As(err, &unavailable):
		return "event could not be recorded; retry later"
	case errors.As(err, &he):
		return http.StatusText(he.Code)
	case status == http.StatusInternalServerError:
		return "internal error"
	}
	// Our own sentinels and verify's errors are written to be shown.
	return err.Error()
}

// handleError is echo's one error handler: every error answer is JSON
// {"error": "..."} with the contract's status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := statusOf(err)
	if err := c.JSON(status, errorBody{Error: publicMessage(err, status)}); err != nil {
		s.logger.Warn("writing error response", "error", err)
	}
}
