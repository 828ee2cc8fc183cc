package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// parseObject decodes body as exactly one JSON object. Numbers stay as
// written (json.Number), so a 64-bit id such as Shopify's is not rounded
// through float64.
func parseObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, invalid(reasonUnparsableBody, "body is not a JSON object")
	}
	// Only whitespace may follow (checked on the bytes: the decoder's
	// Token would allocate a syntax error to say so).
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, invalid(reasonUnparsableBody, "body has data after the JSON object")
		}
	}
	return obj, nil
}

// fromJSON reads the field at a dotted path of object keys ("data.object.id").
// Strings and numbers are scalars; a number keeps its JSON spelling.
func fromJSON(obj map[string]any, path string) value {
	return fromJSONPath(obj, path, false)
}

// fromJSONPath is fromJSON; with indexes, a segment of decimal digits also
// indexes an array ("notificationItems.0.id").
func fromJSONPath(obj map[string]any, path string, indexes bool) value {
	var cur any = obj
	for path != "" {
		var key string
		key, path, _ = strings.Cut(path, ".")
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[key]; !ok {
				return value{}
			}
		case []any:
			i, ok := arrayIndex(key)
			if !indexes || !ok || i >= len(c) {
				return value{}
			}
			cur = c[i]
		default:
			return value{}
		}
	}
	switch v := cur.(type) {
	case nil:
		return value{}
	case string:
		return value{text: v, present: v != "", scalar: true}
	case json.Number:
		return value{text: v.String(), present: true, scalar: true}
	default:
		return value{present: true}
	}
}

// arrayIndex parses a path segment of canonical decimal digits.
func arrayIndex(seg string) (int, bool) {
	if seg == "" || len(seg) > 6 || (seg[0] == '0' && len(seg) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
		n = n*10 + int(seg[i]-'0')
	}
	return n, true
}

// checkUnambiguous refuses a body in which a key along one of paths (dotted
// object keys, as for fromJSON, where a "[]" or index segment stands for
// every element of an array) appears more than once in its object,
// counting keys that differ only in letter case as the same. Parsers
// disagree on such bodies: encoding/json (and stripe-go) matches keys
// without regard to case and keeps the last duplicate, others keep the
// first, so the id hookgate claims could differ from the one the
// downstream reads. body has already parsed as one JSON object
// (parseObject), so it is walked by a scanner that only finds where
// values begin and end, allocating nothing for the keys and values it
// skips.
func checkUnambiguous(body []byte, paths ...string) error {
	live := make([]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			live = append(live, p)
		}
	}
	w := walker{b: body}
	dup, err := w.value(live)
	switch {
	case err != nil:
		return invalid(reasonUnparsableBody, "body is not a JSON object")
	case dup != "":
		return invalid(reasonAmbiguousField, fmt.Sprintf("body has the key %q more than once (letter case aside)", dup))
	}
	return nil
}

// errMalformed is the walker's answer to bytes that are not JSON; the body
// parsed before it is walked, so only a caller's mistake produces it.
var errMalformed = errors.New("malformed JSON")

// walker walks a body that is known to be valid JSON.
type walker struct {
	b []byte
	i int
}

// head splits a dotted path into its first segment and the rest.
func head(path string) (seg, rest string) {
	seg, rest, _ = strings.Cut(path, ".")
	return seg, rest
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value reads the next value. When it is an object, each key that is the
// first segment of one of paths must appear once; the values under such
// keys are walked with the rest of those paths, every other value is
// skipped. It returns the first key found more than once.
func (w *walker) value(paths []string) (dup string, err error) {
	w.ws()
	if w.i >= len(w.b) {
		return "", errMalformed
	}
	switch w.b[w.i] {
	case '[':
		var each []string
		for _, p := range paths {
			seg, rest := head(p)
			if _, index := arrayIndex(seg); (seg == "[]" || index) && rest != "" {
				each = append(each, rest)
			}
		}
		if len(each) == 0 {
			return "", w.skip()
		}
		w.i++
		w.ws()
		if w.i < len(w.b) && w.b[w.i] == ']' {
			w.i++
			return "", nil
		}
		for {
			inner, err := w.value(each)
			if err != nil {
				return "", err
			}
			if dup == "" {
				dup = inner
			}
			if done, err := w.next(']'); err != nil || done {
				return dup, err
			}
		}
	case '{':
		if len(paths) == 0 {
			return "", w.skip()
		}
		w.i++
		w.ws()
		if w.i < len(w.b) && w.b[w.i] == '}' {
			w.i++
			return "", nil
		}
		var seen []string
		for {
			w.ws()
			raw, escaped, err := w.str()
			if err != nil {
				return "", err
			}
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] != ':' {
				return "", errMalformed
			}
			w.i++
			var rest []string
			var key string
			wanted := false
			for _, p := range paths {
				seg, tail := head(p)
				if !keyIs(raw, escaped, seg, &key) {
					continue
				}
				wanted = true
				if tail != "" {
					rest = append(rest, tail)
				}
			}
			if wanted {
				if key == "" {
					key = decodeKey(raw, escaped)
				}
				folded := strings.ToLower(key)
				for _, s := range seen {
					if s == folded && dup == "" {
						dup = key
					}
				}
				seen = append(seen, folded)
			}
			inner, err := w.value(rest)
			if err != nil {
				return "", err
			}
			if dup == "" {
				dup = inner
			}
			if done, err := w.next('}'); err != nil || done {
				return dup, err
			}
		}
	default:
		return "", w.skip()
	}
}

// next reads the comma before another member or element (false), or the
// closing delimiter (true).
func (w *walker) next(closing byte) (bool, error) {
	w.ws()
	if w.i >= len(w.b) {
		return false, errMalformed
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return false, nil
	case closing:
		w.i++
		return true, nil
	}
	return false, errMalformed
}

// str reads a string at w.i and returns its bytes between the quotes, and
// whether they hold an escape.
func (w *walker) str() (raw []byte, escaped bool, err error) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return nil, false, errMalformed
	}
	start := w.i + 1
	for j := start; j < len(w.b); j++ {
		switch w.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			w.i = j + 1
			return w.b[start:j], escaped, nil
		}
	}
	return nil, false, errMalformed
}

// skip moves past the value at w.i.
func (w *walker) skip() error {
	w.ws()
	if w.i >= len(w.b) {
		return errMalformed
	}
	switch w.b[w.i] {
	case '"':
		_, _, err := w.str()
		return err
	case '{', '[':
		for depth := 0; w.i < len(w.b); {
			switch w.b[w.i] {
			case '"':
				if _, _, err := w.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.i++
			if depth == 0 {
				return nil
			}
		}
		return errMalformed
	}
	// A number, true, false or null: up to the next delimiter.
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return nil
		}
		w.i++
	}
	return nil
}

// keyIs reports whether the key whose raw bytes are raw equals seg, letter
// case aside, as strings.EqualFold compares the key encoding/json decodes.
// Plain ASCII keys are compared in place; any other is decoded once, into
// *key.
func keyIs(raw []byte, escaped bool, seg string, key *string) bool {
	if *key == "" && !escaped && ascii(raw) && ascii([]byte(seg)) {
		if len(raw) != len(seg) {
			return false
		}
		for i := range raw {
			a, b := raw[i], seg[i]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if a != b {
				return false
			}
		}
		return true
	}
	if *key == "" {
		*key = decodeKey(raw, escaped)
	}
	return strings.EqualFold(*key, seg)
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// decodeKey decodes a key's raw bytes as encoding/json does (escapes
// resolved, invalid UTF-8 replaced).
func decodeKey(raw []byte, escaped bool) string {
	if !escaped && ascii(raw) {
		return string(raw)
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var s string
	_ = json.Unmarshal(quoted, &s) // the body parsed, so the string does
	return s
}
