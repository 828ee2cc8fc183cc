package sanitize_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/sanitize"
)

func TestLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                        "",
		"plain":                   "plain",
		"two\nlines\r\n":          "two lines",
		"  lead and\t\ttabs  ":    "lead and tabs",
		"bad \xff byte":           "bad byte",
		"bell\x07and\x1bescape":   "bell and escape",
		"unicode ünïcödé stays ✓": "unicode ünïcödé stays ✓",
	} {
		require.Equal(t, want, sanitize.Line(in), "%q", in)
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", sanitize.Cut("short", 10))
	require.Equal(t, "exactly10!", sanitize.Cut("exactly10!", 10))
	got := sanitize.Cut(strings.Repeat("a", 1<<20), 256)
	require.LessOrEqual(t, len(got), 256)
	require.True(t, strings.HasSuffix(got, "…"))
	// Never splits a character.
	got = sanitize.Cut(strings.Repeat("é", 100), 10)
	require.LessOrEqual(t, len(got), 10)
	require.True(t, utf8.ValidString(got), "%q", got)
}
