package route

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/itchyny/gojq"

	"github.com/hookgate/hookgate/internal/sanitize"
)

// EvalTimeout bounds one evaluation of a route's jq program: a runaway
// program (an endless range, a deep recursion) fails instead of holding a
// request or a worker slot.
const EvalTimeout = time.Second

// maxErrorLen bounds the jq error text carried into a delivery's last_error
// or a log line; gojq quotes parts of the values it failed on.
const maxErrorLen = 300

// program is one compiled jq program of a route, safe for concurrent use.
// It sees the input as ., the event as $event and its predecessors'
// results as $results; it reads no environment
// variables ($ENV and env are empty) and no further inputs. It is compiled
// rewritten so that what it builds is bounded (see BuildBytes).
type program struct {
	// key names the program in errors: routes[2].body.
	key  string
	code *gojq.Code
	// literals are the program's string constants, which its errors may quote.
	literals map[string]bool
	// timeout bounds one evaluation; zero means EvalTimeout.
	timeout time.Duration
}

// noNow shadows jq's now in body programs: the bytes of a delivery must be
// the same on every attempt, and the time is not.
const noNow = `def now: error("now is not allowed here: the body must be the same on every attempt"); `

// compile parses and compiles src; key names it in the error. With
// deterministic, programs that read the clock fail when they do.
func compile(key, src string, deterministic bool) (*program, error) {
	if src == "" {
		return nil, nil
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: is not a valid jq program: %s", key, sanitize.Line(err.Error()))
	}
	if err := checkProgram(q); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	p := &program{key: key, literals: stringLiterals(q)}
	if deterministic {
		src = noNow + src
		p.literals["now is not allowed here: the body must be the same on every attempt"] = true
	}
	if q, err = gojq.Parse(prelude(q) + src); err != nil {
		return nil, fmt.Errorf("%s: is not a valid jq program: %s", key, sanitize.Line(err.Error()))
	}
	rewrite(q)
	opts := append([]gojq.CompilerOption{gojq.WithVariables([]string{"$event", "$results", budgetVar})}, checks...)
	if p.code, err = gojq.Compile(q, opts...); err != nil {
		return nil, fmt.Errorf("%s: does not compile as jq: %s", key, sanitize.Line(err.Error()))
	}
	return p, nil
}

// run evaluates p over in, a document of inputSize bytes, with $event ev
// and $results results (see Route.results), and calls yield
// with each value until yield returns false, within EvalTimeout and the
// bounds of BuildBytes. An error is the program's, names p's key, and
// quotes none of the values it failed on.
//
// When the caller's ctx ends first, run returns a *stopped error, which is
// not the program's fault.
func (p *program) run(ctx context.Context, in any, inputSize int, ev, results map[string]any, yield func(v any) bool) error {
	parent := ctx
	timeout := p.timeout
	if timeout == 0 {
		timeout = EvalTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	iter := p.code.RunWithContext(ctx, in, ev, results, newBudget(inputSize))
	for {
		v, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, isErr := v.(error); isErr {
			switch {
			case parent.Err() != nil:
				return &stopped{err: parent.Err()}
			case errors.Is(err, context.DeadlineExceeded):
				return fmt.Errorf("%s: took longer than %s", p.key, timeout)
			}
			return fmt.Errorf("%s: %s", p.key, describe(err, p.literals))
		}
		if !yield(v) {
			return nil
		}
	}
}

// stopped is an evaluation cut short by its caller's context.
type stopped struct{ err error }

func (s *stopped) Error() string { return "evaluation stopped: " + s.err.Error() }
func (s *stopped) Unwrap() error { return s.err }

// describe is a jq error as one bounded line of printable text that quotes
// none of the values it failed on (see describeJQ).
func describe(err error, literals map[string]bool) string {
	return sanitize.Cut(sanitize.Line(describeJQ(err, literals)), maxErrorLen)
}

// decode parses a JSON document as jq sees it: numbers stay json.Number, so
// an integer too large for a float64 (Shopify's ids) passes through intact.
// One value only; anything after it is an error.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("is not JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("is not one JSON value")
	}
	return v, nil
}
