package verify

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// hmacVerifier verifies the generic scheme: HMAC-SHA256 of the body (or of
// timestamp + "." + body) in a header of the sender's choosing, with the id
// and type read from a header or the body as configured. It has no ObjectID.
type hmacVerifier struct {
	secrets   [][]byte
	tolerance time.Duration

	header          string
	prefix          string
	decode          func(string) ([]byte, bool)
	timestampHeader string
	id              source
	typ             source // zero when TypeFrom is empty
}

// source is where a field is read: a header or a dotted JSON path.
type source struct {
	header   string
	jsonPath string
}

// read returns the field from h or obj; obj is nil unless some source needs it.
func (s source) read(h http.Header, obj map[string]any) value {
	if s.header != "" {
		return fromHeader(h, s.header)
	}
	return fromJSON(obj, s.jsonPath)
}

// readEvent reads the event's id, and its type where typ is set, from a
// verified request: headers or the body's JSON, parsed once and only when
// a source needs it. It is the common tail of the configurable schemes.
func readEvent(body []byte, h http.Header, id, typ source) (Event, error) {
	var obj map[string]any
	if id.jsonPath != "" || typ.jsonPath != "" {
		var err error
		if obj, err = parseObject(body); err != nil {
			return Event{}, err
		}
		if err := checkUnambiguous(body, id.jsonPath, typ.jsonPath); err != nil {
			return Event{}, err
		}
	}
	idv := id.read(h, obj)
	if typ == (source{}) {
		if err := checkID(idv); err != nil {
			return Event{}, err
		}
		return Event{ID: idv.text, Body: obj}, nil
	}
	return withBody(normalize(idv, typ.read(h, obj), value{}))(obj)
}

// parseSources parses c's id_from (required) and type_from (optional, a
// zero source when empty), with messages that name the setting.
func parseSources(c Config) (id, typ source, err error) {
	if c.IDFrom == "" {
		return id, typ, fmt.Errorf("id_from is required for scheme %s (header:NAME or json:dotted.path)", c.Scheme)
	}
	if id, err = parseSource(c.IDFrom); err != nil {
		return id, typ, fmt.Errorf("id_from %q %w", c.IDFrom, err)
	}
	if c.TypeFrom != "" {
		if typ, err = parseSource(c.TypeFrom); err != nil {
			return id, typ, fmt.Errorf("type_from %q %w", c.TypeFrom, err)
		}
	}
	return id, typ, nil
}

// parseSource parses "header:NAME" or "json:dotted.path".
func parseSource(spec string) (source, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch {
	case arg == "" || strings.ContainsAny(arg, " \t"):
	case kind == "header":
		return source{header: arg}, nil
	case kind == "json" && !strings.HasPrefix(arg, ".") && !strings.HasSuffix(arg, ".") && !strings.Contains(arg, ".."):
		return source{jsonPath: arg}, nil
	}
	return source{}, errors.New("must be header:NAME or json:dotted.path")
}

// newHMACVerifier validates the hmac-only settings of c.
func newHMACVerifier(c Config, secrets [][]byte, tolerance time.Duration) (*hmacVerifier, error) {
	v := &hmacVerifier{
		secrets:         secrets,
		tolerance:       tolerance,
		header:          c.Header,
		prefix:          c.Prefix,
		timestampHeader: c.TimestampHeader,
	}
	if c.Header == "" {
		return nil, errors.New("header is required for scheme hmac")
	}
	switch c.Encoding {
	case "hex":
		v.decode = decodeHexMAC
	case "base64":
		v.decode = decodeBase64MAC
	default:
		return nil, fmt.Errorf("encoding %q must be hex or base64 for scheme hmac", c.Encoding)
	}
	var err error
	if v.id, v.typ, err = parseSources(c); err != nil {
		return nil, err
	}
	return v, nil
}

// Verify implements Verifier.
func (v *hmacVerifier) Verify(body []byte, h http.Header, now time.Time) (Event, error) {
	header := h.Get(v.header)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+v.header+" header")
	}
	encoded, ok := strings.CutPrefix(header, v.prefix)
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, fmt.Sprintf("%s header does not start with %q", v.header, v.prefix))
	}
	sig, ok := v.decode(encoded)
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, v.header+" header is not an encoded SHA-256 HMAC")
	}

	content := [][]byte{body}
	var ts time.Time
	if v.timestampHeader != "" {
		t := h.Get(v.timestampHeader)
		if t == "" {
			return Event{}, unauthorized(reasonMissingTimestamp, "missing "+v.timestampHeader+" header")
		}
		if ts, ok = parseUnix(t); !ok {
			return Event{}, unauthorized(reasonMalformedTimestamp, v.timestampHeader+" header is not unix seconds")
		}
		content = [][]byte{[]byte(t), []byte("."), body}
	}
	if !matchAny(v.secrets, [][]byte{sig}, content...) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	if v.timestampHeader != "" {
		if err := checkTolerance(ts, now, v.tolerance); err != nil {
			return Event{}, err
		}
	}

	return readEvent(body, h, v.id, v.typ)
}
