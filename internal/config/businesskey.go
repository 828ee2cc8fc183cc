package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// Business-key sources, the entries of Route.BusinessKey.
const (
	// KeyFromType takes the event's normalized type.
	KeyFromType = "type"
	// keyFromJSON prefixes a dotted path of object keys into the JSON body.
	keyFromJSON = "json:"
	// keyFromHeader prefixes a request header's name.
	keyFromHeader = "header:"
)

// validBusinessKey checks a route's business_key: at least one source, each
// type, json:dotted.path or header:NAME, none twice, and not type alone
// (every event of a type would share one key, so only the first would ever
// be delivered).
func (v *validator) validBusinessKey(key string, sources []string) {
	if sources == nil {
		return
	}
	if len(sources) == 0 {
		v.add(key, "must list at least one source (type, json:dotted.path or header:NAME), or be left out")
		return
	}
	seen := map[string]bool{}
	onlyType := true
	for i, s := range sources {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := validKeySource(s); err != nil {
			v.add(k, "%q %v", s, err)
			onlyType = false // one problem at a time
			continue
		}
		if seen[s] {
			v.add(k, "%q is listed twice", s)
		}
		seen[s] = true
		onlyType = onlyType && s == KeyFromType
	}
	if onlyType {
		v.add(key, "lists only type: every event of a type would share one key and only the first would ever be delivered; add the object it is about, e.g. json:data.object.id")
	}
}

func validKeySource(s string) error {
	const want = "must be type, json:dotted.path or header:NAME"
	switch {
	case s == KeyFromType:
		return nil
	case strings.HasPrefix(s, keyFromJSON):
		path := strings.TrimPrefix(s, keyFromJSON)
		for seg := range strings.SplitSeq(path, ".") {
			if seg == "" || strings.ContainsAny(seg, " \t\r\n") {
				return errors.New(want + " (a path of object keys separated by single dots)")
			}
		}
		return nil
	case strings.HasPrefix(s, keyFromHeader):
		name := strings.TrimPrefix(s, keyFromHeader)
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenRune(r) }) >= 0 {
			return errors.New(want + " (a header name of letters, digits and -)")
		}
		return nil
	}
	return errors.New(want)
}

func isTokenRune(r rune) bool {
	return r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}

// KeyInput is a verified event as a business key reads it. The body is
// parsed at most once, and only if a route's key reads from it, however
// many routes ask.
type KeyInput struct {
	Type   string
	Header http.Header
	Body   []byte

	parsed bool
	obj    map[string]any
}

func (in *KeyInput) object() map[string]any {
	if !in.parsed {
		in.parsed = true
		dec := json.NewDecoder(bytes.NewReader(in.Body))
		// Numbers keep their spelling: a 64-bit id must not be rounded
		// through float64 into another order's key.
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) == nil {
			if _, err := dec.Token(); errors.Is(err, io.EOF) {
				in.obj = obj
			}
		}
	}
	return in.obj
}

// BusinessKeyOf computes the route's business key for a verified event: its
// listed values, in order, as a JSON array of strings (so distinct lists
// give distinct keys). It returns "" and nil when the route has none. When a
// value is missing (absent, null, empty, or not a string, number or
// boolean) the error names the source; it is what the delivery fails with,
// and carries nothing from the event itself.
func (r Route) BusinessKeyOf(in *KeyInput) (string, error) {
	if len(r.BusinessKey) == 0 {
		return "", nil
	}
	values := make([]string, len(r.BusinessKey))
	for i, s := range r.BusinessKey {
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
func keyValue(source string, in *KeyInput) (value, why string) {
	switch {
	case source == KeyFromType:
		if in.Type == "" {
			return "", "is missing: the event has no type"
		}
		return in.Type, ""
	case strings.HasPrefix(source, keyFromHeader):
		v := in.Header.Get(textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(source, keyFromHeader)))
		if v == "" {
			return "", "is missing from the request"
		}
		return v, ""
	}
	obj := in.object()
	if obj == nil {
		return "", "cannot be read: the body is not a JSON object"
	}
	var cur any = obj
	for seg := range strings.SplitSeq(strings.TrimPrefix(source, keyFromJSON), ".") {
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
