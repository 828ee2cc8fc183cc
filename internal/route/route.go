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
	"slices"

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

	// Dependents is whether another route names this one in its after:
	// completing this route's delivery may release theirs.
	Dependents bool

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
	for _, r := range t.routes {
		for _, name := range r.After {
			if p, ok := t.byName[name]; ok {
				p.Dependents = true
			}
		}
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

// MaxAttempts returns the max_attempts of the route named name, or 0 for
// a route that is not configured (any more): the number a delivery job is
// enqueued with (see claim.NewStore).
func (t *Table) MaxAttempts(name string) int {
	if r, ok := t.byName[name]; ok {
		return r.MaxAttempts
	}
	return 0
}

// HasDependents reports whether another route names the route named name
// in its after (Route.Dependents); false for a route not configured.
func (t *Table) HasDependents(name string) bool {
	r, ok := t.byName[name]
	return ok && r.Dependents
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
