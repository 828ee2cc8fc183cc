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

	"github.com/hookgate/hookgate/internal/config"
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
// It sees the input as . and the event as $event; it reads no environment
// variables ($ENV and env are empty) and no further inputs.
type program struct {
	code *gojq.Code
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
	if err := config.CheckJQ(src); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if deterministic {
		src = noNow + src
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: is not a valid jq program: %s", key, sanitize.Line(err.Error()))
	}
	code, err := gojq.Compile(q, gojq.WithVariables(config.JQVariables))
	if err != nil {
		return nil, fmt.Errorf("%s: does not compile as jq: %s", key, sanitize.Line(err.Error()))
	}
	return &program{code: code}, nil
}

// run evaluates p over in and calls yield with each value until yield
// returns false, within EvalTimeout. An error is the program's, bounded and
// on one line.
//
// When the caller's ctx ends first, run returns a *stopped error, which is
// not the program's fault.
func (p *program) run(ctx context.Context, in any, ev map[string]any, yield func(v any) bool) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	iter := p.code.RunWithContext(ctx, in, ev)
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
				return fmt.Errorf("took longer than %s", EvalTimeout)
			}
			return errors.New(describe(err))
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

// describe is a jq error as one bounded line of printable text.
func describe(err error) string {
	var halt *gojq.HaltError
	if errors.As(err, &halt) && halt.Value() == nil {
		return "halted"
	}
	return sanitize.Cut(sanitize.Line(err.Error()), maxErrorLen)
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
