package ingest

import "time"

// SetLineBudget sets how many INFO lines of accepted requests s writes a
// second, and the clock it reads.
func (s *Server) SetLineBudget(perSecond int, now func() time.Time) {
	s.lines.SetPerSecond(perSecond)
	s.now = now
}
