// Package lockout refuses a name's sign-in attempts for a while once it has
// failed too often, in bounded memory however many names are tried.
package lockout

import (
	"cmp"
	"container/list"
	"sync"
	"time"
)

// Limiter counts failed sign-ins per name. After Failures of them within
// Window of a name's first, that name's next tries are refused until the
// window ends; a success forgets its failures. The zero value is ready to
// use. A Limiter must not be copied after first use.
//
// Memory is bounded by Names: a client can send any number of made-up
// names, so past that many tracked at once, the entry whose window started
// first is dropped to make room. A name is refused only for failures of
// its own: a name the table does not hold (never failed, or dropped) may
// always try. A flood of made-up names therefore costs the flooder the
// counts of its oldest names, never anyone else a try; the names it floods
// stay bounded by their own limit for as long as they are held.
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

	mu    sync.Mutex
	names map[string]*list.Element
	// order holds the entries by the start of their window, oldest first:
	// a new or restarted window goes to the back, so the front is the one
	// to drop when the table is full.
	order list.List
}

type entry struct {
	name     string
	start    time.Time // the first failure of the window
	failures int
}

// Wait returns how long name must wait before its next try: zero when it
// may try now.
func (l *Limiter) Wait(name string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	el, ok := l.names[name]
	if !ok {
		return 0
	}
	e := el.Value.(*entry)
	if l.expired(e, now) || e.failures < cmp.Or(l.Failures, 5) {
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
	el, ok := l.names[name]
	if !ok {
		el = l.track(name, now)
	}
	e := el.Value.(*entry)
	if l.expired(e, now) {
		e.start, e.failures = now, 0
		l.order.MoveToBack(el)
	}
	e.failures++
	return e.failures == cmp.Or(l.Failures, 5)
}

// Succeed forgets name's failures.
func (l *Limiter) Succeed(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.names[name]; ok {
		l.order.Remove(el)
		delete(l.names, name)
	}
}

// Len returns how many names the limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

// track gives name an entry of its own at the back, dropping expired
// entries and then the oldest ones to stay within Names.
func (l *Limiter) track(name string, now time.Time) *list.Element {
	if l.names == nil {
		l.names = map[string]*list.Element{}
	}
	for front := l.order.Front(); front != nil && (len(l.names) >= l.capacity() || l.expired(front.Value.(*entry), now)); front = l.order.Front() {
		l.order.Remove(front)
		delete(l.names, front.Value.(*entry).name)
	}
	el := l.order.PushBack(&entry{name: name, start: now})
	l.names[name] = el
	return el
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
