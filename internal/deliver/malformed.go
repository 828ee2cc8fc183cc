package deliver

import (
	"errors"
	"net/textproto"
	"strings"
)

// malformedPrefix begins the reason of an answer Go's HTTP client could not
// parse.
const malformedPrefix = "malformed response from the downstream: "

// malformedKinds map the texts net/http, net/textproto and the HTTP/2
// transport give an answer they cannot parse (read in the Go 1.26 sources:
// net/http/response.go, transfer.go, transport.go, internal/chunked.go,
// net/textproto/reader.go) to a fixed reason. Those texts quote the bytes
// that did not parse, which the downstream chose: a status line or header
// echoing what it was sent would put a secret, or anything else, in
// last_error, the attempts' error and the log, which viewers read. The
// first kind whose marker the error's text contains wins.
var malformedKinds = []struct{ marker, reason string }{
	{"malformed HTTP status code", "bad status code"},
	{"malformed HTTP version", "bad HTTP version"},
	{"malformed HTTP response", "bad status line"},
	{"malformed MIME header", "bad header"},
	{"Content-Length", "bad Content-Length"},
	{"transfer encoding", "bad Transfer-Encoding"},
	{"header line too long", "headers too large"},
	{"response headers exceeded", "headers too large"},
	{"chunk", "bad chunked body"},
	{"trailer", "bad trailer"},
	{"Trailer", "bad trailer"},
	{"http2: ", "HTTP/2 protocol error"},
}

// malformedAnswer returns the fixed reason of err when it says the
// downstream's answer could not be parsed.
func malformedAnswer(err error) (string, bool) {
	text := err.Error()
	for _, k := range malformedKinds {
		if strings.Contains(text, k.marker) {
			return malformedPrefix + k.reason, true
		}
	}
	var pe textproto.ProtocolError
	if errors.As(err, &pe) {
		return malformedPrefix + "bad header", true
	}
	return "", false
}

// unquoted is an error's text up to its first quote: Go's errors quote the
// value that caused them (%q), and for a transport error that value may
// be the downstream's.
func unquoted(text string) string {
	if i := strings.IndexAny(text, "\"`'"); i >= 0 {
		text = strings.TrimRight(text[:i], " :") + " (value left out)"
	}
	return text
}
