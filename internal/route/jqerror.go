package route

import (
	"errors"
	"regexp"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/hookgate/hookgate/internal/sanitize"
)

// A jq run-time error's text quotes the values it failed on ("expected an
// object but got: string (\"card=4242…\")"), and those come from a
// provider's body or a downstream's answer. What describe makes of one keeps
// the error's kind and drops every quoted value, so that no body text
// reaches a log line, a metric, last_error or an API answer.
//
// gojq's error types are unexported; their texts are "kind: type (preview)"
// or "name(preview) cannot be applied to …", with the fixed part first. The
// patterns below keep that fixed part, and at most the value's type, which
// is one of jq's six names. Anything they do not recognise is reported by
// kind alone.

// jqTypes is jq's type names, the only word kept from after a fixed part.
const jqTypes = `(null|boolean|number|string|array|object)`

var (
	// fixedKinds are errors whose text is a fixed phrase, then ": ", then
	// the value's type and preview.
	fixedKinds = regexp.MustCompile(`^(expected an object but got|expected an array but got|cannot iterate over|` +
		`expected a string for object key but got|expected a number for indexing an array but got|` +
		`expected a number for indexing a string but got|expected "start" and "end" for slicing but got|` +
		`invalid path against|invalid path on iterating against|@[a-z0-9]+ cannot format an array including): ` + jqTypes + `\b`)
	// bareKinds are errors whose text is all fixed, or fixed up to a value.
	bareKinds = regexp.MustCompile(`^(array index should not be negative|array index too large|repeat string result too large|` +
		`flatten depth should not be negative|length mismatch|expected an array of 8 numbers|number of seconds is out of range|` +
		`number is out of range|input\(s\)/0 is not allowed)\b`)
	// programKinds name only what the program itself spelled.
	programKinds = regexp.MustCompile(`^(label not defined|format not defined|function not defined|variable not defined|` +
		`variable defined but not bound|invalid variable name): [A-Za-z0-9_@$/]{1,64}$`)
	// binopKinds: "cannot add: type (preview) and type (preview)".
	binopKinds = regexp.MustCompile(`^cannot (add|subtract|multiply|divide|modulo|negate|[a-z]+): ` + jqTypes + `\b`)
	// funcKinds: "name cannot be applied to: type (preview)", or with
	// arguments and a preview of the input before the cause.
	funcKinds = regexp.MustCompile(`^([A-Za-z_@][A-Za-z0-9_]{0,63})( cannot be applied to: ` + jqTypes + `\b|\(| cannot be applied to )`)
)

// describeJQ is a jq run-time error as one line that quotes nothing of the
// values it failed on. literals are the program's own string constants: an
// error("…") raised with one of them is quoted, being the program's words.
func describeJQ(err error, literals map[string]bool) string {
	var halt *gojq.HaltError
	if errors.As(err, &halt) {
		if halt.Value() == nil {
			return "halted"
		}
		return "halt_error raised with " + article(gojq.TypeOf(halt.Value()))
	}
	var limit *limitError
	if errors.As(err, &limit) {
		return limit.Error()
	}
	var ve gojq.ValueError
	if errors.As(err, &ve) {
		v := ve.Value()
		if s, ok := v.(string); ok && literals[s] {
			return "error: " + sanitize.Cut(sanitize.Line(s), maxErrorLen)
		}
		if v == nil {
			return "error(null) raised"
		}
		return "error raised with " + article(gojq.TypeOf(v)) + " (not quoted: it may hold body text)"
	}
	msg := err.Error()
	if m := fixedKinds.FindStringSubmatch(msg); m != nil {
		return m[1] + ": " + m[2]
	}
	if m := bareKinds.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	if programKinds.MatchString(msg) {
		return msg
	}
	if m := binopKinds.FindStringSubmatch(msg); m != nil {
		if m[1] == "negate" {
			return "cannot negate: " + m[2]
		}
		return "cannot " + m[1] + ": " + m[2] + " and the other operand"
	}
	if m := funcKinds.FindStringSubmatch(msg); m != nil {
		name := m[1]
		switch {
		case m[3] != "":
			return name + " cannot be applied to: " + m[3]
		case m[2] == "(":
			return name + "(…) cannot be applied to its input with these arguments"
		}
		return name + " cannot be applied to its input"
	}
	return "run-time error (its text is not quoted: it may hold body text)"
}

// article is "a string", "an object", "null".
func article(typ string) string {
	switch {
	case typ == "null":
		return "null"
	case strings.IndexByte("aeiou", typ[0]) >= 0:
		return "an " + typ
	}
	return "a " + typ
}

// stringLiterals returns the string constants of q, without interpolation.
func stringLiterals(q *gojq.Query) map[string]bool {
	lits := map[string]bool{}
	walkTerms(q, func(t *gojq.Term) {
		if t.Type == gojq.TermTypeString && t.Str != nil && len(t.Str.Queries) == 0 {
			lits[t.Str.Str] = true
		}
	})
	return lits
}
