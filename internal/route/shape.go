package route

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/itchyny/gojq"
)

// What a route sends: its headers, the body its program shapes, the
// target its path program appends to, and the result it keeps of the answer.

// Header returns the route's static and secret headers; the caller must not
// change it, nor log the values.
func (r *Route) Header() http.Header { return r.header }

// Shaped reports whether r sends a body of its own rather than the provider's.
func (r *Route) Shaped() bool { return r.body != nil }

// ErrProgram marks a failure of a route's body program: the delivery cannot
// be sent, and retrying will not change that until the program does.
var ErrProgram = errors.New("route program failed")

// Body returns what an attempt of ev to r sends, and its content type:
// payload and contentType unchanged when r has no body program, else the
// program's one value as JSON. The same program over the same payload
// yields the same bytes, so every attempt sends the same. A failure of the
// program wraps ErrProgram and says why in one bounded line; an evaluation
// cut short by ctx returns ctx's error instead.
func (r *Route) Body(ctx context.Context, ev Event, payload []byte, contentType string) ([]byte, string, error) {
	if r.body == nil {
		return payload, contentType, nil
	}
	fail := func(format string, args ...any) ([]byte, string, error) {
		return nil, "", r.body.fail(format, args...)
	}
	v, n, err := r.one(ctx, r.body, ev, payload)
	switch {
	case err != nil:
		return nil, "", err
	case n == 0:
		return fail("the program yielded no value; it must yield one")
	case n > 1:
		return fail("the program yielded more than one value; it must yield one")
	}
	out, err := gojq.Marshal(v)
	if err != nil {
		return fail("the value is not JSON") // gojq's text would quote it
	}
	if len(out) > MaxBodyBytes {
		return fail("the value is %d bytes of JSON, over the %d allowed", len(out), MaxBodyBytes)
	}
	return out, JSONContentType, nil
}

// Bounds on what a path program yields.
const (
	// MaxPathSegments bounds how many segments a path program appends.
	MaxPathSegments = 32
	// MaxPathBytes bounds the escaped path it appends.
	MaxPathBytes = 2 << 10
)

// Target returns the URL an attempt of ev to r is sent to: the route's url,
// with the segments of its path program, if any, appended. The program
// runs over the provider's JSON body and must yield one value, a string or
// a list of strings; each string is one segment, percent-escaped (a "/" in
// it is sent as %2F), so the scheme, host and the path of url never come
// from the event. A segment that is empty, "." or ".." is refused: it would
// name another resource than one below url. A failure wraps ErrProgram.
func (r *Route) Target(ctx context.Context, ev Event, payload []byte) (string, error) {
	if r.path == nil {
		return r.URL, nil
	}
	fail := func(format string, args ...any) (string, error) {
		return "", r.path.fail(format, args...)
	}
	v, n, err := r.one(ctx, r.path, ev, payload)
	switch {
	case err != nil:
		return "", err
	case n != 1:
		return fail("the program yielded %d values; it must yield one, a string or a list of strings", n)
	}
	var segments []string
	switch v := v.(type) {
	case string:
		segments = []string{v}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fail("the list holds a value of type %s; every segment must be a string", jqType(e))
			}
			segments = append(segments, s)
		}
	default:
		return fail("the value is of type %s; it must be a string or a list of strings", jqType(v))
	}
	if len(segments) > MaxPathSegments {
		return fail("%d segments, over the %d allowed", len(segments), MaxPathSegments)
	}
	base, err := url.Parse(r.URL)
	if err != nil {
		return "", fmt.Errorf("route %s: invalid URL", r.Name)
	}
	escaped := strings.TrimSuffix(base.EscapedPath(), "/")
	added := 0
	for i, s := range segments {
		switch s {
		case "", ".", "..":
			return fail("segment %d is %q; a segment must name something below the url", i+1, s)
		}
		e := url.PathEscape(s)
		added += len(e) + 1
		escaped += "/" + e
	}
	if added > MaxPathBytes {
		return fail("the path is %d bytes escaped, over the %d allowed", added, MaxPathBytes)
	}
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return "", fmt.Errorf("route %s: invalid URL", r.Name)
	}
	target := *base
	target.Path, target.RawPath = unescaped, escaped
	return target.String(), nil
}

// one runs p, a program of r that must yield one value, over payload, and
// returns its value and how many it yielded (counting stops at two). A
// payload that is not JSON, or a failed program, is an error wrapping
// ErrProgram; an evaluation cut short by ctx returns ctx's error instead.
func (r *Route) one(ctx context.Context, p *program, ev Event, payload []byte) (any, int, error) {
	doc, err := decode(payload)
	if err != nil {
		return nil, 0, p.fail("the event body %v", err)
	}
	var values []any
	results, size := r.results(ev)
	err = p.run(ctx, doc, len(payload)+size, r.event(ev), results, func(v any) bool {
		values = append(values, v)
		return len(values) < 2
	})
	var stop *stopped
	switch {
	case errors.As(err, &stop):
		return nil, 0, err
	case err != nil:
		return nil, 0, fmt.Errorf("%w: %w", ErrProgram, err)
	case len(values) == 0:
		return nil, 0, nil
	}
	return values[0], len(values), nil
}

// fail is a failure of p: it wraps ErrProgram and names p's key.
func (p *program) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{ErrProgram, p.key}, args...)...)
}

// jqType names a value's jq type, for errors that must not quote it.
func jqType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

// HasResult reports whether r records a result from the downstream's answer.
func (r *Route) HasResult() bool { return r.result != nil }

// Result runs r's result program over response, the downstream's answer to
// a delivered attempt of ev, and returns its first value as JSON: nil when
// r has no result program or it yielded nothing. The value is at most
// MaxResultBytes; a larger one is an error.
func (r *Route) Result(ctx context.Context, ev Event, response []byte) ([]byte, error) {
	if r.result == nil {
		return nil, nil
	}
	doc, err := decode(response)
	if err != nil {
		return nil, fmt.Errorf("%s: the response %w", r.result.key, err)
	}
	var first any
	got := false
	results, size := r.results(ev)
	err = r.result.run(ctx, doc, len(response)+size, r.event(ev), results, func(v any) bool {
		first, got = v, true
		return false
	})
	if err != nil {
		return nil, err
	}
	if !got {
		return nil, nil
	}
	out, err := gojq.Marshal(first)
	if err != nil {
		return nil, fmt.Errorf("%s: the value is not JSON", r.result.key) // gojq's text would quote it
	}
	if len(out) > MaxResultBytes {
		return nil, fmt.Errorf("%s: the value is %d bytes of JSON, over the %d allowed", r.result.key, len(out), MaxResultBytes)
	}
	return out, nil
}
