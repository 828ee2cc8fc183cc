package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/hookgate/hookgate/internal/claim"
)

// readTimedOut reports whether err is a read that ran into the read pool's
// bounds (claim.ErrReadTimeout), and if so answers 503 through answer with
// a message naming the bound and its setting. A read waiting for a
// connection may well pass a moment later, so it gets Retry-After.
func (s *Server) readTimedOut(w http.ResponseWriter, r *http.Request, err error, answer func(status int, msg string)) bool {
	var rt *claim.ReadTimeoutError
	if !errors.Is(err, claim.ErrReadTimeout) || !errors.As(err, &rt) {
		return false
	}
	msg := fmt.Sprintf("the read ran past console.read_pool.statement_timeout (%s) and was cancelled: narrow the filters or the window", rt.Limit)
	if rt.Waiting {
		msg = fmt.Sprintf("every read connection (console.read_pool.max_conns) stayed busy for console.read_pool.wait_timeout (%s): try again", rt.Limit)
		w.Header().Set("Retry-After", "1")
	}
	s.logger.Warn("console: read timed out", slog.String("route", r.Pattern), slog.String("error", err.Error()))
	answer(http.StatusServiceUnavailable, msg)
	return true
}
