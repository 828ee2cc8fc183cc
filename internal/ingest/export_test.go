package ingest

import (
	"time"

	"github.com/hookgate/hookgate/internal/logbudget"
)

// SetLineBudget sets how many INFO lines of accepted requests s writes a
// second, and the clock it reads: set before s serves.
func (s *Server) SetLineBudget(perSecond int, now func() time.Time) {
	s.lines = logbudget.New(perSecond, requestLinesSummary)
	s.now = now
}
