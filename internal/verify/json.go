package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid(reasonUnparsableBody, "body has data after the JSON object")
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
// downstream reads. body has already parsed as one JSON object.
func checkUnambiguous(body []byte, paths ...string) error {
	split := make([][]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			split = append(split, strings.Split(p, "."))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dup, err := walkPaths(dec, split)
	switch {
	case err != nil:
		return invalid(reasonUnparsableBody, "body is not a JSON object")
	case dup != "":
		return invalid(reasonAmbiguousField, fmt.Sprintf("body has the key %q more than once (letter case aside)", dup))
	}
	return nil
}

// walkPaths reads the next value from dec. When it is an object, each key
// that is the first segment of one of paths must appear once; the values
// under such keys are walked with the rest of those paths, every other
// value is skipped. It returns the first key found more than once.
func walkPaths(dec *json.Decoder, paths [][]string) (dup string, err error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "", nil
	}
	if d == '[' {
		var each [][]string
		for _, p := range paths {
			if _, index := arrayIndex(p[0]); (p[0] == "[]" || index) && len(p) > 1 {
				each = append(each, p[1:])
			}
		}
		if len(each) == 0 {
			return "", skipRest(dec)
		}
		for dec.More() {
			inner, err := walkPaths(dec, each)
			if err != nil {
				return "", err
			}
			if dup == "" {
				dup = inner
			}
		}
		_, err = dec.Token() // the closing bracket
		return dup, err
	}
	if len(paths) == 0 {
		return "", skipRest(dec)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		key, _ := tok.(string)
		var rest [][]string
		wanted := false
		for _, p := range paths {
			if strings.EqualFold(key, p[0]) {
				wanted = true
				if len(p) > 1 {
					rest = append(rest, p[1:])
				}
			}
		}
		if wanted {
			folded := strings.ToLower(key)
			if seen[folded] && dup == "" {
				dup = key
			}
			seen[folded] = true
		}
		inner, err := walkPaths(dec, rest)
		if err != nil {
			return "", err
		}
		if dup == "" {
			dup = inner
		}
	}
	_, err = dec.Token() // the closing brace
	return dup, err
}

// skipRest consumes the rest of an object or array whose opening delimiter
// was just read.
func skipRest(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}
