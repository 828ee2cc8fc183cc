package lockout_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/lockout"
)

// clock is a settable time for the limiter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup() (*lockout.Limiter, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	return &lockout.Limiter{Now: c.now, Names: 8}, c
}

// TestFiveFailuresLockTheName: five failures within a minute refuse the
// name until a minute after the first; other names are unaffected; after
// the window the name may try again.
func TestFiveFailuresLockTheName(t *testing.T) {
	t.Parallel()
	l, c := setup()
	for i := range 5 {
		require.Zero(t, l.Wait("admin"), "try %d", i+1)
		require.Equal(t, i == 4, l.Fail("admin"), "locked on the fifth failure only")
		c.t = c.t.Add(10 * time.Second)
	}
	require.Equal(t, 10*time.Second, l.Wait("admin"), "refused until a minute after the first failure")
	require.Zero(t, l.Wait("alice"), "another name may try")
	c.t = c.t.Add(10 * time.Second)
	require.Zero(t, l.Wait("admin"), "the window ended")
	l.Fail("admin")
	require.Zero(t, l.Wait("admin"), "a new window counts from one")
}

// TestSuccessForgets: a success clears the name's failures.
func TestSuccessForgets(t *testing.T) {
	t.Parallel()
	l, _ := setup()
	for range 4 {
		l.Fail("admin")
	}
	l.Succeed("admin")
	for range 4 {
		l.Fail("admin")
	}
	require.Zero(t, l.Wait("admin"))
}

// TestFloodNeverLocksOutAnUntrackedName: ten thousand made-up names, five
// failures each, past a table of eight: the table stays at eight, the
// oldest entries go first, and a name with no failures of its own (never
// tried, or dropped) is never refused. Before, past the table's size every
// untracked name shared one entry, which the flood locked for everyone.
func TestFloodNeverLocksOutAnUntrackedName(t *testing.T) {
	t.Parallel()
	l, _ := setup()
	for i := range 10000 {
		for range 5 {
			l.Fail(fmt.Sprintf("made-up-%d", i))
		}
		require.LessOrEqual(t, l.Len(), 8)
	}
	require.Zero(t, l.Wait("never-tried"), "a name with no failures of its own may try")
	require.Zero(t, l.Wait("made-up-0"), "the oldest entries were dropped")
	require.Positive(t, l.Wait("made-up-9999"), "the newest keep their own counts")
	require.Positive(t, l.Wait("made-up-9992"))
	require.Zero(t, l.Wait("made-up-9991"), "the ninth newest was dropped")
}

// TestEvictionDropsTheOldestWindow: when the table is full, the entry whose
// window started first goes, not one that failed recently; a name whose
// window restarted after expiring counts as new; expired entries go
// before live ones.
func TestEvictionDropsTheOldestWindow(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	l := &lockout.Limiter{Now: c.now, Names: 3, Failures: 2}
	l.Fail("a")
	c.t = c.t.Add(time.Second)
	l.Fail("b")
	l.Fail("b")
	c.t = c.t.Add(time.Second)
	l.Fail("c")
	l.Fail("a") // a's second failure does not make it newer: its window started first
	require.Positive(t, l.Wait("a"))
	l.Fail("d")
	require.Zero(t, l.Wait("a"), "a, the oldest window, was dropped")
	require.Positive(t, l.Wait("b"), "b kept its count")
	require.Equal(t, 3, l.Len())

	// b's window ends and restarts: it is now the newest, c the oldest.
	c.t = c.t.Add(time.Minute)
	l.Fail("b")
	l.Fail("b")
	l.Fail("e")
	require.Positive(t, l.Wait("b"), "b's restarted window is the newest")
	require.Equal(t, 2, l.Len(), "the expired entries (c, d) went before any live one")
}
