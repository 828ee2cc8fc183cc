package deliver

import (
	"time"

	"github.com/hookgate/hookgate/internal/logbudget"
)

// SetLineBudget sets how many "delivered" lines w writes a second, and the
// clock it reads.
func (w *Worker) SetLineBudget(perSecond int, now func() time.Time) {
	w.lines = logbudget.New(perSecond, deliveredLinesSummary)
	w.now = now
}
