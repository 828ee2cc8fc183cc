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

// TestManyNamesStayBounded: ten thousand made-up names, five failures
// each, never lock out a name tracked before them; past the table's size
// they share one entry, which they lock for one another; once expired,
// entries make room again.
func TestManyNamesStayBounded(t *testing.T) {
	t.Parallel()
	l, c := setup()
	l.Fail("admin")
	for i := range 10000 {
		for range 5 {
			l.Fail(fmt.Sprintf("made-up-%d", i))
		}
	}
	require.Zero(t, l.Wait("admin"), "the tracked name keeps its own count")
	require.Positive(t, l.Wait("made-up-9999"), "the untracked share one entry, which they locked")
	require.Positive(t, l.Wait("never-tried"), "while the table is full, an untracked name shares that entry")
	c.t = c.t.Add(time.Minute)
	require.Zero(t, l.Wait("never-tried"))
	l.Fail("fresh")
	require.Zero(t, l.Wait("fresh"), "expired entries made room: one failure is its own")
}
