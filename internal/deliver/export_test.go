package deliver

import "time"

// SetLineBudget sets how many "delivered" lines w writes a second, and the
// clock it reads.
func (w *Worker) SetLineBudget(perSecond int, now func() time.Time) {
	w.lines.SetPerSecond(perSecond)
	w.now = now
}
