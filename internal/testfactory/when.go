package testfactory

import "time"

// When is a time for the factory's time fields: an instant, or a time
// relative to the database's clock, where now() is the start of the
// transaction, which a test in a rolled-back transaction never leaves.
type When struct {
	ago time.Duration
	at  *time.Time
}

// Ago is d before now.
func Ago(d time.Duration) *When { return &When{ago: d} }

// In is d after now.
func In(d time.Duration) *When { return &When{ago: -d} }

// Now is now.
func Now() *When { return &When{} }

// At is the instant t, for times several rows must share exactly.
func At(t time.Time) *When { return &When{at: &t} }

// seconds is how many seconds before now w is; 0 (now) for nil or an
// instant.
func (w *When) seconds() float64 {
	if w == nil {
		return 0
	}
	return w.ago.Seconds()
}

// instant is w's instant; nil for nil or a time relative to now.
func (w *When) instant() *time.Time {
	if w == nil {
		return nil
	}
	return w.at
}

// times collects When fields for Claims' arrays: an absolute time or how
// many seconds before now.
type times struct {
	at  []*time.Time
	ago []*float64
}

// add adds w; a nil w is now when orNow, else none.
func (ts *times) add(w *When, orNow bool) {
	switch {
	case w == nil && !orNow:
		ts.at, ts.ago = append(ts.at, nil), append(ts.ago, nil)
	case w != nil && w.at != nil:
		ts.at, ts.ago = append(ts.at, w.at), append(ts.ago, nil)
	default:
		s := w.seconds()
		ts.at, ts.ago = append(ts.at, nil), append(ts.ago, &s)
	}
}
