// Package sanitize makes untrusted or unbounded text fit for a log line, an
// error message or a stored last_error: one printable line, cut to a size.
package sanitize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line replaces control characters, invalid UTF-8 and runs of white space
// with one space, leaving one printable line without trailing space.
func Line(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

// Cut returns s cut to at most n bytes on a character boundary, with "…"
// marking the cut; s itself when it fits.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
