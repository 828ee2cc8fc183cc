package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/operator"
)

// statusOf is the one table from an error to the status and message the
// API (fail) and the pages (pageError) answer:
//
//   - a bad request (badRequest, operator.InvalidError): 400 with its message;
//   - what is not there (operator.NotFoundError): 404;
//   - what the state refuses (operator.RefusedError) or a bulk retry whose
//     dry run no longer holds (operator.ChangedError): 409;
//   - a read past the read pool's bounds (claim.ErrReadTimeout): 503 naming
//     the bound and its setting, with Retry-After when it waited for a
//     connection;
//   - a cell that cannot be reached (operator.UnavailableError, a claim's
//     cell down): 503 naming the cell, with Retry-After;
//   - anything else: 500 without its text, which is logged instead (it may
//     carry SQL or a connection's detail).
func (s *Server) statusOf(w http.ResponseWriter, r *http.Request, err error) (int, string) {
	var (
		br *badRequest
		iv *operator.InvalidError
		nf *operator.NotFoundError
		rf *operator.RefusedError
		ch *operator.ChangedError
		rt *claim.ReadTimeoutError
		un *operator.UnavailableError
		cd *cellDownError
	)
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest, br.msg
	case errors.As(err, &iv):
		return http.StatusBadRequest, iv.Msg
	case errors.As(err, &nf):
		return http.StatusNotFound, nf.Msg
	case errors.As(err, &rf):
		return http.StatusConflict, rf.Msg
	case errors.As(err, &ch):
		return http.StatusConflict, ch.Error()
	case errors.Is(err, claim.ErrReadTimeout) && errors.As(err, &rt):
		s.logger.Warn("console: read timed out", slog.String("route", r.Pattern), slog.String("error", err.Error()))
		if rt.Waiting {
			w.Header().Set("Retry-After", "1")
			return http.StatusServiceUnavailable, fmt.Sprintf(
				"every read connection (console.read_pool.max_conns) stayed busy for console.read_pool.wait_timeout (%s): try again", rt.Limit)
		}
		return http.StatusServiceUnavailable, fmt.Sprintf(
			"the read ran past console.read_pool.statement_timeout (%s) and was cancelled: narrow the filters or the window", rt.Limit)
	case errors.As(err, &un):
		s.logger.Warn("console: cell unavailable", slog.String("route", r.Pattern), slog.String("error", un.Err.Error()))
		w.Header().Set("Retry-After", "1")
		return http.StatusServiceUnavailable, un.Error()
	case errors.As(err, &cd):
		s.logger.Warn("console: cell unavailable", slog.String("route", r.Pattern), slog.String("error", cd.err.Error()))
		w.Header().Set("Retry-After", "1")
		return http.StatusServiceUnavailable, cd.Error()
	default:
		s.logger.Error("console: request failed", slog.String("route", r.Pattern), slog.String("error", err.Error()))
		return http.StatusInternalServerError, "internal error; see the worker's log"
	}
}
