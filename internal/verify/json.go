package verify

import (
	"bytes"
	"encoding/json"
	"errors"
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
	var cur any = obj
	for path != "" {
		m, ok := cur.(map[string]any)
		if !ok {
			return value{}
		}
		var key string
		key, path, _ = strings.Cut(path, ".")
		if cur, ok = m[key]; !ok {
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
