package route

import (
	"context"
	"mime"
	"net/http"
	"strings"
)

// MaxSuccessBytes is how much of an answer's body the success program
// sees: the first 64 KiB, as text or, when it is JSON and all of it was
// read, parsed.
const MaxSuccessBytes = 64 << 10

// HasSuccess reports whether r has a success program: whether a 2xx
// answer delivers only when the program says so.
func (r *Route) HasSuccess() bool { return r.success != nil }

// Succeeded runs r's success program over a 2xx answer: its status, its
// headers (names lower-cased, the first value of each) and body, the
// first MaxSuccessBytes of it (the caller reads no more). body is the
// parsed JSON when the answer's Content-Type is JSON and it parses, else
// the text. It reports whether the program's first value is true; an
// error (the program's, bounded and quoting nothing of the answer) or any
// other value is false. A route without a success program succeeds.
func (r *Route) Succeeded(ctx context.Context, ev Event, status int, header http.Header, body []byte) (bool, error) {
	if r.success == nil {
		return true, nil
	}
	headers := make(map[string]any, len(header))
	size := len(body)
	for name, values := range header {
		if len(values) > 0 {
			headers[strings.ToLower(name)] = values[0]
			size += len(name) + len(values[0])
		}
	}
	var doc any = string(body)
	if jsonType(header.Get("Content-Type")) && len(body) <= MaxSuccessBytes {
		if v, err := decode(body); err == nil {
			doc = v
		}
	}
	in := map[string]any{"status": status, "headers": headers, "body": doc}
	var first any
	got := false
	results, rsize := r.results(ev)
	err := r.success.run(ctx, in, size+rsize, r.event(ev), results, func(v any) bool {
		first, got = v, true
		return false
	})
	if err != nil {
		return false, err
	}
	return got && first == true, nil
}

// jsonType reports whether a Content-Type names JSON: application/json or
// a +json type.
func jsonType(contentType string) bool {
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return t == "application/json" || strings.HasSuffix(t, "+json")
}
