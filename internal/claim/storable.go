package claim

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrUnstorable marks an event holding text the claim tables cannot store:
// bytes that are not UTF-8, or a NUL, which Postgres refuses in text
// (SQLSTATE 22021). Ingest checks what it stores before it claims; this is
// the claim's own check (Storable), made before any statement, so that such an event
// fails alone, at once, and the others of its batch do not pay for it.
var ErrUnstorable = errors.New("the event holds text the claim tables cannot store")

// Storable reports which of ev's text fields (or its routes' names) the
// tables cannot hold, naming the field and never quoting its value. The
// claim checks it before any statement; a batching caller (ingest's group)
// checks it first, to fail such an event alone.
func Storable(ev Event, routes []string) error {
	type field struct{ name, value string }
	fields := []field{
		{"provider", ev.Provider}, {"event id", ev.ID}, {"event type", ev.Type}, {"object id", ev.ObjectID},
		{"Content-Type", ev.ContentType}, {"Content-Encoding", ev.ContentEncoding},
	}
	for _, r := range routes {
		fields = append(fields, field{"route", r})
	}
	for _, k := range ev.BusinessKeys {
		fields = append(fields, field{"business key's route", k.Route}, field{"business key", k.Key},
			field{"business key's reason", k.Missing})
	}
	for _, f := range fields {
		if !StorableText(f.value) {
			return fmt.Errorf("%w: the %s is not UTF-8 text without NUL bytes", ErrUnstorable, f.name)
		}
	}
	switch ev.Source {
	case "", SourceWebhook, SourceReconcile:
	default:
		return fmt.Errorf("%w: the source must be %s or %s", ErrUnstorable, SourceWebhook, SourceReconcile)
	}
	return nil
}

// StorableText reports whether the claim tables can hold s as text: UTF-8
// without NUL bytes. Whatever reaches their statements from a request (a
// path, a filter, a cursor) is checked with it first, so that such input is
// refused as the request's fault rather than failing its statement.
func StorableText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
