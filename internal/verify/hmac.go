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
	secrets [][]byte

	header string
	prefix string
	decode func(string) ([]byte, bool)
	signedEvent
}

// signedEvent is what the configurable schemes (hmac, ed25519, ecdsa) do
// around their signature check: read the signed timestamp header and, once
// the signature checks out, hold the timestamp to the tolerance and read
// the event's id and type. One place, so that the schemes cannot drift in
// their reasons and messages.
type signedEvent struct {
	tolerance       time.Duration
	timestampHeader string // empty when the scheme signs no timestamp
	id              source
	typ             source // zero when TypeFrom is empty
}

// newSignedEvent reads c's timestamp_header, id_from and type_from.
func newSignedEvent(c Config, tolerance time.Duration) (signedEvent, error) {
	e := signedEvent{tolerance: tolerance, timestampHeader: c.TimestampHeader}
	var err error
	if e.id, e.typ, err = parseSources(c); err != nil {
		return signedEvent{}, err
	}
	return e, nil
}

// readTimestamp returns the timestamp header's value as sent (it is part of
// the signed content) and parsed as unix seconds.
func (e signedEvent) readTimestamp(h http.Header) (string, time.Time, error) {
	t := h.Get(e.timestampHeader)
	if t == "" {
		return "", time.Time{}, unauthorized(reasonMissingTimestamp, "missing "+e.timestampHeader+" header")
	}
	ts, ok := parseUnix(t)
	if !ok {
		return "", time.Time{}, unauthorized(reasonMalformedTimestamp, e.timestampHeader+" header is not unix seconds")
	}
	return t, ts, nil
}

// event is the tail of a verification whose signature checked out: the
// timestamp ts (where the scheme signs one) against the tolerance, then the
// id and type. It runs after the signature so that
// timestamp_out_of_tolerance counts genuine but stale deliveries, not
// forgeries.
func (e signedEvent) event(body []byte, h http.Header, ts, now time.Time) (Event, error) {
	if e.timestampHeader != "" {
		if err := checkTolerance(ts, now, e.tolerance); err != nil {
			return Event{}, err
		}
	}
	return readEvent(body, h, e.id, e.typ)
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
		secrets: secrets,
		header:  c.Header,
		prefix:  c.Prefix,
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
	if v.signedEvent, err = newSignedEvent(c, tolerance); err != nil {
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
		t, parsed, err := v.readTimestamp(h)
		if err != nil {
			return Event{}, err
		}
		ts = parsed
		content = [][]byte{[]byte(t), []byte("."), body}
	}
	if !matchAny(v.secrets, [][]byte{sig}, content...) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	return v.event(body, h, ts, now)
}
