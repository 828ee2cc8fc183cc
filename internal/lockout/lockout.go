// Package lockout refuses a name's sign-in attempts for a while once it has
// failed too often, in bounded memory however many names are tried.
package lockout

import (
	"cmp"
	"sync"
	"time"
)

// Limiter counts failed sign-ins per name. After Failures of them within
// Window of a name's first, that name's next tries are refused until the
// window ends; a success forgets its failures. The zero value is ready to
// use. A Limiter must not be copied after first use.
//
// Memory is bounded by Names: a client can send any number of made-up
// names, so past that many tracked at once (and none of them expired), a
// name not tracked is counted under one shared entry. A flood of made-up
// names then locks out made-up names, and the names already tracked keep
// their own counts. Callers that know which names exist can bound it
// further by passing one key for every unknown name.
type Limiter struct {
	// Failures is how many failed attempts a name may make within Window
	// before its tries are refused. Zero means 5.
	Failures int
	// Window is how long failures count from a name's first, and so the
	// longest a name is refused. Zero means one minute.
	Window time.Duration
	// Names caps the names tracked at once. Zero means 1024.
	Names int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	names    map[string]*entry
	overflow entry
}

type entry struct {
	start    time.Time // the first failure of the window
	failures int
}

// Wait returns how long name must wait before its next try: zero when it
// may try now.
func (l *Limiter) Wait(name string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e := l.lookup(name)
	if e == nil || l.expired(e, now) || e.failures < cmp.Or(l.Failures, 5) {
		return 0
	}
	return e.start.Add(l.window()).Sub(now)
}

// Fail records a failed attempt by name. It reports whether name is now
// refused, so that the caller can say so once.
func (l *Limiter) Fail(name string) (locked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e := l.lookup(name)
	if e == nil {
		e = l.track(name, now)
	}
	if l.expired(e, now) {
		*e = entry{start: now}
	}
	e.failures++
	return e.failures == cmp.Or(l.Failures, 5)
}

// Succeed forgets name's failures.
func (l *Limiter) Succeed(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.names, name)
}

// lookup returns name's entry: its own, or the shared one when the table
// is full and name is not in it; nil when name has none.
func (l *Limiter) lookup(name string) *entry {
	if e, ok := l.names[name]; ok {
		return e
	}
	if len(l.names) >= l.capacity() && l.overflow.failures > 0 {
		return &l.overflow
	}
	return nil
}

// track gives name an entry of its own, dropping expired entries first
// when the table is full, or returns the shared one when it stays full.
func (l *Limiter) track(name string, now time.Time) *entry {
	if l.names == nil {
		l.names = map[string]*entry{}
	}
	if len(l.names) >= l.capacity() {
		for n, e := range l.names {
			if l.expired(e, now) {
				delete(l.names, n)
			}
		}
	}
	if len(l.names) >= l.capacity() {
		return &l.overflow
	}
	e := &entry{start: now}
	l.names[name] = e
	return e
}

func (l *Limiter) expired(e *entry, now time.Time) bool { return !now.Before(e.start.Add(l.window())) }

func (l *Limiter) window() time.Duration { return cmp.Or(l.Window, time.Minute) }

func (l *Limiter) capacity() int { return cmp.Or(l.Names, 1024) }

func (l *Limiter) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}
