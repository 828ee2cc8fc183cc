// Package route is the compiled route table: each configured route with its
// type patterns, jq filter, request shape (method, headers, jq body) and jq
// result, built once at start so that ingest (which routes take an event)
// and the worker (what an attempt sends, what it records) read the same one.
package route

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/idemkey"
)

// Bounds on what programs yield.
const (
	// MaxBodyBytes bounds the JSON a body program yields: a delivery sends
	// at most this much.
	MaxBodyBytes = 1 << 20
	// MaxResultBytes bounds the JSON a result program yields, which is
	// stored on the delivery.
	MaxResultBytes = 1 << 10
)

// JSONContentType is what a shaped body is sent as.
const JSONContentType = "application/json"

// Event is what programs see as $event, besides the route's name and the
// delivery's idempotency key.
type Event struct {
	Provider, ID, Type string
	// Results holds the recorded result (JSON) of the route's
	// predecessors (after), by route name; one absent or nil is none.
	// Empty at ingest, where nothing has run yet.
	Results map[string][]byte
}

// Route is one configured route, compiled.
type Route struct {
	config.Route

	filter, body, result, path, success *program
	// header holds the static and secret headers, canonical names; the
	// values of secret ones must never be logged.
	header http.Header
}

// Table is every configured route, compiled; safe for concurrent use.
type Table struct {
	routes []*Route
	byName map[string]*Route
}

// New compiles cfg's routes. secretHeaders is config.Secrets.Headers: the
// values of each route's secret_headers. An error names the key.
func New(cfg *config.Config, secretHeaders map[string]map[string]string) (*Table, error) {
	t := &Table{byName: map[string]*Route{}}
	var errs []error
	for i, c := range cfg.Routes {
		key := fmt.Sprintf("routes[%d]", i)
		r := &Route{Route: c, header: http.Header{}}
		// Config.Parse sets these defaults; a Config built in code may not.
		r.Method = cmp.Or(c.Method, http.MethodPost)
		r.IdempotencyHeader = cmp.Or(c.IdempotencyHeader, config.DefaultIdempotencyHeader)
		var err error
		if r.filter, err = compile(key+".filter", c.Filter, false); err != nil {
			errs = append(errs, err)
		}
		if r.body, err = compile(key+".body", c.Body, true); err != nil {
			errs = append(errs, err)
		}
		if r.result, err = compile(key+".result", c.Result, false); err != nil {
			errs = append(errs, err)
		}
		if r.path, err = compile(key+".path", c.Path, true); err != nil {
			errs = append(errs, err)
		}
		if r.success, err = compile(key+".success", c.Success, false); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", c.Name, err))
		}
		for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
			r.header.Set(name, c.Headers[name])
		}
		for _, name := range slices.Sorted(maps.Keys(c.SecretHeaders)) {
			v, ok := secretHeaders[c.Name][name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s.secret_headers.%s: environment variable %s was not read", key, name, c.SecretHeaders[name]))
				continue
			}
			r.header.Set(name, v)
		}
		t.routes = append(t.routes, r)
		t.byName[c.Name] = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// Routes returns every route, in file order.
func (t *Table) Routes() []*Route { return t.routes }

// Route returns the route named name.
func (t *Table) Route(name string) (*Route, bool) {
	r, ok := t.byName[name]
	return r, ok
}

// Unmatched is a route whose type patterns took an event but whose filter
// did not.
type Unmatched struct {
	Route string
	// Err is the filter's error (or the body's: not JSON); nil when the
	// filter yielded something other than true.
	Err error
}

// Match returns the routes that take the event of in, in file order: those
// of its provider whose type patterns match, and whose filter, if any,
// yields true over its body. Routes whose filter said no are in unmatched.
// The body is parsed once, and only when a filter needs it and the
// verifier did not already.
func (t *Table) Match(ctx context.Context, in *Input) (matched []*Route, unmatched []Unmatched) {
	ev := in.Event
	for _, r := range t.routes {
		if r.Provider != ev.Provider || !r.Matches(ev.Type) {
			continue
		}
		if r.filter == nil {
			matched = append(matched, r)
			continue
		}
		ok, err := r.takes(ctx, in)
		if ok {
			matched = append(matched, r)
			continue
		}
		unmatched = append(unmatched, Unmatched{Route: r.Name, Err: err})
	}
	return afterMatched(matched), unmatched
}

// afterMatched keeps of matched the routes each of whose after routes is
// kept too: a later step takes an event only when the steps before it do,
// down the whole chain.
func afterMatched(matched []*Route) []*Route {
	for {
		kept := make(map[string]bool, len(matched))
		for _, r := range matched {
			kept[r.Name] = true
		}
		out := matched[:0:0]
		for _, r := range matched {
			if !slices.ContainsFunc(r.After, func(name string) bool { return !kept[name] }) {
				out = append(out, r)
			}
		}
		if len(out) == len(matched) {
			return matched
		}
		matched = out
	}
}

// takes runs r's filter: only a first value of true matches.
func (r *Route) takes(ctx context.Context, in *Input) (bool, error) {
	doc, err := in.document()
	if err != nil {
		return false, err
	}
	var first any
	got := false
	results, size := r.results(in.Event)
	err = r.filter.run(ctx, doc, len(in.Body)+size, r.event(in.Event), results, func(v any) bool {
		first, got = v, true
		return false
	})
	if err != nil {
		return false, err
	}
	return got && first == true, nil
}

// event is $event for r.
func (r *Route) event(ev Event) map[string]any {
	return map[string]any{
		"provider":        ev.Provider,
		"id":              ev.ID,
		"type":            ev.Type,
		"route":           r.Name,
		"idempotency_key": idemkey.Of(ev.Provider, ev.ID, r.Name),
	}
}

// results is $results for r and ev: each route r runs after, by name, with
// its recorded result decoded, or null where none is recorded (or it is
// not JSON); {} for a route without after. size is the results' bytes,
// which the programs' build budget counts as input.
func (r *Route) results(ev Event) (results map[string]any, size int) {
	results = make(map[string]any, len(r.After))
	for _, name := range r.After {
		raw := ev.Results[name]
		results[name] = nil
		if raw == nil {
			continue
		}
		if v, err := decode(raw); err == nil {
			results[name] = v
			size += len(raw)
		}
	}
	return results, size
}

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
		return nil, "", fmt.Errorf("%w: %s: "+format, append([]any{ErrProgram, r.body.key}, args...)...)
	}
	doc, err := decode(payload)
	if err != nil {
		return fail("the event body %v", err)
	}
	var values []any
	results, size := r.results(ev)
	err = r.body.run(ctx, doc, len(payload)+size, r.event(ev), results, func(v any) bool {
		values = append(values, v)
		return len(values) < 2
	})
	var stop *stopped
	switch {
	case errors.As(err, &stop):
		return nil, "", err
	case err != nil:
		return nil, "", fmt.Errorf("%w: %w", ErrProgram, err)
	case len(values) == 0:
		return fail("the program yielded no value; it must yield one")
	case len(values) > 1:
		return fail("the program yielded more than one value; it must yield one")
	}
	out, err := gojq.Marshal(values[0])
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
		return "", fmt.Errorf("%w: %s: "+format, append([]any{ErrProgram, r.path.key}, args...)...)
	}
	doc, err := decode(payload)
	if err != nil {
		return fail("the event body %v", err)
	}
	var values []any
	results, size := r.results(ev)
	err = r.path.run(ctx, doc, len(payload)+size, r.event(ev), results, func(v any) bool {
		values = append(values, v)
		return len(values) < 2
	})
	var stop *stopped
	switch {
	case errors.As(err, &stop):
		return "", err
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrProgram, err)
	case len(values) != 1:
		return fail("the program yielded %d values; it must yield one, a string or a list of strings", len(values))
	}
	var segments []string
	switch v := values[0].(type) {
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
