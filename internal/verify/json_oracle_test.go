package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// checkUnambiguousDecoder is checkUnambiguous as it was written over
// encoding/json's token stream, kept as the oracle the scanner must agree with.
func checkUnambiguousDecoder(body []byte, paths ...string) error {
	split := make([][]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			split = append(split, strings.Split(p, "."))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dup, err := walkPathsDecoder(dec, split)
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
func walkPathsDecoder(dec *json.Decoder, paths [][]string) (dup string, err error) {
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
			return "", skipRestDecoder(dec)
		}
		for dec.More() {
			inner, err := walkPathsDecoder(dec, each)
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
		return "", skipRestDecoder(dec)
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
		inner, err := walkPathsDecoder(dec, rest)
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
func skipRestDecoder(dec *json.Decoder) error {
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

// The scanner agrees with the token stream on every body that parses as
// one object: the same verdict, and the same key named.
func FuzzCheckUnambiguousAgrees(f *testing.F) {
	for _, seed := range []string{
		`{"id":"a","type":"b"}`,
		`{"id":"a","ID":"b"}`,
		`{"id":"a","\u0069d":"b"}`,
		`{"data":{"object":{"id":1,"Id":2}}}`,
		`{"items":[{"id":"a"},{"id":"b","iD":[1,{"x":"}"}]}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"x","pspreference":"y"}}]}`,
		`{"a":true,"b":null,"c":-1.5e3,"id":"\"","type":["x","y"]} `,
		`{"ſcope":1,"scope":2}`,
		`{"k":1,"K":2}`,
		`{}`,
	} {
		f.Add([]byte(seed), "id", "type")
	}
	f.Add([]byte(`{"items":[{"id":"a","ID":"b"}]}`), "items.0.id", "items.[].id")
	f.Add([]byte(`{"scope":1,"ſcope":2}`), "scope", "k")
	f.Fuzz(func(t *testing.T, body []byte, p1, p2 string) {
		if _, err := parseObject(body); err != nil {
			return
		}
		got, want := checkUnambiguous(body, p1, p2), checkUnambiguousDecoder(body, p1, p2)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("body %q, paths %q %q: scanner says %v, token stream says %v", body, p1, p2, got, want)
		}
	})
}
