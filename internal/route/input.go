package route

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/hookgate/hookgate/internal/config"
)

// Input is a verified event as its routes read it: filters, business keys.
// Its body is parsed at most once, however many routes read it, and not at
// all when the verifier already did or no route needs it. An Input is used
// by one request at a time.
type Input struct {
	Event  Event
	Header http.Header
	Body   []byte

	parsed bool
	doc    any
	docErr error
}

// NewInput returns the Input of a verified event. parsed is the body as the
// verifier parsed it (verify.Event.Body), or nil when it did not.
func NewInput(ev Event, h http.Header, body []byte, parsed map[string]any) *Input {
	in := &Input{Event: ev, Header: h, Body: body}
	if parsed != nil {
		in.parsed, in.doc = true, parsed
	}
	return in
}

// document returns the parsed body, parsing it on first use.
func (in *Input) document() (any, error) {
	if !in.parsed {
		in.parsed = true
		in.doc, in.docErr = decode(in.Body)
		if in.docErr != nil {
			in.docErr = fmt.Errorf("the event body %w", in.docErr)
		}
	}
	return in.doc, in.docErr
}

// HasBusinessKey reports whether r keys its deliveries by a business key.
func (r *Route) HasBusinessKey() bool { return len(r.Route.BusinessKey) > 0 }

// BusinessKey computes r's business key for a verified event: its listed
// values, in order, as a JSON array of strings (so distinct lists give
// distinct keys). It returns "" and nil when the route has none. When a
// value is missing (absent, null, empty, or not a string, number or
// boolean) the error names the source; it is what the delivery fails with,
// and carries nothing from the event itself.
func (r *Route) BusinessKey(in *Input) (string, error) {
	if !r.HasBusinessKey() {
		return "", nil
	}
	values := make([]string, len(r.Route.BusinessKey))
	for i, s := range r.Route.BusinessKey {
		v, why := keyValue(s, in)
		if why != "" {
			return "", fmt.Errorf("business key: %s %s", s, why)
		}
		values[i] = v
	}
	b, err := json.Marshal(values)
	if err != nil { // strings always marshal
		return "", fmt.Errorf("business key: %w", err)
	}
	return string(b), nil
}

// keyValue reads one source; why says what is wrong when it cannot.
func keyValue(source string, in *Input) (value, why string) {
	switch {
	case source == config.KeyFromType:
		if in.Event.Type == "" {
			return "", "is missing: the event has no type"
		}
		return in.Event.Type, ""
	case strings.HasPrefix(source, config.KeyFromHeader):
		v := in.Header.Get(textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(source, config.KeyFromHeader)))
		if v == "" {
			return "", "is missing from the request"
		}
		return v, ""
	}
	doc, _ := in.document()
	obj, ok := doc.(map[string]any)
	if !ok {
		return "", "cannot be read: the body is not a JSON object"
	}
	var cur any = obj
	for seg := range strings.SplitSeq(strings.TrimPrefix(source, config.KeyFromJSON), ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", "is missing from the body"
		}
		if cur, ok = m[seg]; !ok {
			return "", "is missing from the body"
		}
	}
	switch v := cur.(type) {
	case nil:
		return "", "is null in the body"
	case string:
		if v == "" {
			return "", "is empty in the body"
		}
		return v, ""
	case json.Number:
		return v.String(), ""
	case bool:
		return fmt.Sprint(v), ""
	}
	return "", "is not a string, number or boolean in the body"
}
