package console

import (
	"regexp"

	"github.com/hookgate/hookgate/internal/claim"
)

// quotedAnswer finds the text that releases before this one quoted from a
// downstream's answer after the status line of a stored error ("HTTP 422
// Unprocessable Entity: card 4242… declined"): status texts hold no colon.
var quotedAnswer = regexp.MustCompile(`(HTTP [0-9]{3}[^:]*): .*$`)

// reasonOnly is a stored error as the API and the pages show it: without
// any text of a downstream's answer. Errors written now never hold such
// text; those written before keep it in the database until retention
// deletes them, and are cut here, for every role.
func reasonOnly(s string) string { return quotedAnswer.ReplaceAllString(s, "$1") }

// withoutAnswers applies reasonOnly to a claim's error.
func withoutAnswers(r claim.Record) claim.Record {
	r.LastError = reasonOnly(r.LastError)
	return r
}

// attemptsWithoutAnswers applies reasonOnly to each attempt's error, in
// place.
func attemptsWithoutAnswers(as []claim.AttemptRecord) {
	for i := range as {
		if as[i].Error != nil {
			e := reasonOnly(*as[i].Error)
			as[i].Error = &e
		}
	}
}
