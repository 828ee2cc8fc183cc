package route

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/itchyny/gojq"
)

// What one evaluation of a route program may build.
//
// A program is the operator's, but its operands come from a provider's body
// (or a downstream's answer), and gojq checks its context only between the
// steps of its machine: one step ("x" * $n, setpath([$n]; 1)) may allocate
// without bound, and values that share parts ({a: ., b: .} in a loop) grow
// twice as large each step while tojson of them costs their full size in
// one. gojq offers no hook on its operators, so route compiles each program
// rewritten: the operations that grow go through checks registered with
// gojq.WithFunction, which see the operands before (string repetition,
// array indexes) or the value after (everything else that builds) and fail
// the evaluation past the bounds below. See docs/architecture.md, "jq
// bounds".
const (
	// BuildBytes is what one value a program builds may weigh, and what all
	// the arrays it collects in one evaluation may weigh together, besides
	// BuildPerInputByte for each byte of its input. A value weighs about
	// its JSON size, counted as a tree: a part shared twice counts twice.
	BuildBytes = 16 << 20
	// BuildPerInputByte scales the bound with the input, so that a program
	// may copy and reshape a large body.
	BuildPerInputByte = 4
	// MaxArrayIndex bounds an index into an array, or a path, that a
	// program sets: setting index n allocates n slots at once.
	MaxArrayIndex = 1 << 20
	// MaxNumberBits bounds the integers a program multiplies: squaring a
	// number doubles its size, and multiplying large ones is slow.
	MaxNumberBits = 1 << 16
)

// Names the rewrite adds; a program may not use them itself.
const (
	reservedFunc = "_hg_"
	budgetVar    = "$__hg"
)

// budget is what one evaluation has left to build. It is passed to the
// checks as the hidden variable $__hg, so that concurrent evaluations of
// one compiled program each have their own. It is used by one goroutine.
type budget struct {
	// max bounds one value; collected is what the arrays built so far weigh.
	max, collected int64
	// sizes memoizes the weight of shared arrays and objects by identity.
	// Its keys keep their values alive, so an address is never reused while
	// it is remembered.
	sizes map[memoKey]int64
}

type memoKey struct {
	p unsafe.Pointer
	n int
}

func newBudget(inputSize int) *budget {
	return &budget{max: BuildBytes + BuildPerInputByte*int64(inputSize)}
}

// limitError is an evaluation stopped by a bound. Its text names the bound,
// never the values that reached it.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func (b *budget) overValue() error {
	return &limitError{fmt.Sprintf("builds a value over the bound of %s (%d MiB plus %d bytes per input byte)",
		mib(b.max), BuildBytes>>20, BuildPerInputByte)}
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// weigh returns v's weight, stopping once it passes limit.
func (b *budget) weigh(v any, limit int64) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 2
	case json.Number:
		return int64(len(x))
	case *big.Int:
		return int64(x.BitLen()/8) + 8
	case []any:
		if len(x) == 0 {
			return 2
		}
		key := memoKey{unsafe.Pointer(&x[0]), len(x)}
		if n, ok := b.sizes[key]; ok {
			return n
		}
		n := int64(2)
		for _, e := range x {
			if n += 8 + b.weigh(e, limit-n); n > limit {
				return n
			}
		}
		b.remember(key, n)
		return n
	case map[string]any:
		if len(x) == 0 {
			return 2
		}
		key := memoKey{reflect.ValueOf(x).UnsafePointer(), -1}
		if n, ok := b.sizes[key]; ok {
			return n
		}
		n := int64(2)
		for k, e := range x {
			if n += int64(len(k)) + 8 + b.weigh(e, limit-n); n > limit {
				return n
			}
		}
		b.remember(key, n)
		return n
	}
	return 8
}

// elemWeight is what one more element of an array, or one more assigned
// reference, costs besides its value: its slot and gojq's bookkeeping.
const elemWeight = 32

// memoMin is the weight from which weigh remembers a value: lighter ones
// cost little to weigh again, and most programs build only those.
const memoMin = 1 << 10

func (b *budget) remember(k memoKey, n int64) {
	if n < memoMin {
		return
	}
	if b.sizes == nil {
		b.sizes = map[memoKey]int64{}
	}
	b.sizes[k] = n
}

// The checks, each registered with gojq.WithFunction. Their first argument
// is $__hg; each returns its input when the bound holds.
var checks = []gojq.CompilerOption{
	// _hg_sized: . is a value just built; it may weigh at most max.
	gojq.WithFunction("_hg_sized", 1, 1, func(v any, args []any) any {
		b, ok := args[0].(*budget)
		if !ok {
			return v
		}
		switch v.(type) {
		case string, []any, map[string]any, *big.Int:
			if b.weigh(v, b.max) > b.max {
				return b.overValue()
			}
		}
		return v
	}),
	// _hg_charge: . is about to join an array being collected, or to be
	// set at a path; it is charged each time, since each is a reference
	// that tojson and the like will spell out in full.
	gojq.WithFunction("_hg_charge", 1, 1, func(v any, args []any) any {
		b, ok := args[0].(*budget)
		if !ok {
			return v
		}
		if b.collected += elemWeight + b.weigh(v, b.max-b.collected); b.collected > b.max {
			return &limitError{fmt.Sprintf("builds more than %s of arrays and assigned values in one evaluation (%d MiB plus %d bytes per input byte)",
				mib(b.max), BuildBytes>>20, BuildPerInputByte)}
		}
		return v
	}),
	// _hg_repeat($__hg; $l; $r): before $l * $r, which repeats a string
	// when one side is a string and the other a number.
	gojq.WithFunction("_hg_repeat", 3, 3, func(v any, args []any) any {
		b, ok := args[0].(*budget)
		if !ok {
			return v
		}
		s, n, ok := repetition(args[1], args[2])
		if !ok {
			s, n, ok = repetition(args[2], args[1])
		}
		if ok && n > 0 && float64(len(s))*n > float64(b.max) {
			return &limitError{fmt.Sprintf("repeats a string beyond the bound of %s (%d MiB plus %d bytes per input byte)",
				mib(b.max), BuildBytes>>20, BuildPerInputByte)}
		}
		if bits(args[1])+bits(args[2]) > MaxNumberBits {
			return errNumber
		}
		return v
	}),
	// _hg_index: . is an array index or an object key.
	gojq.WithFunction("_hg_index", 0, 0, func(v any, _ []any) any {
		if tooLargeIndex(v) {
			return errIndex
		}
		return v
	}),
	// _hg_path: . is a path about to be set.
	gojq.WithFunction("_hg_path", 0, 0, func(v any, _ []any) any {
		if p, ok := v.([]any); ok {
			for _, e := range p {
				if tooLargeIndex(e) {
					return errIndex
				}
			}
		}
		return v
	}),
}

var (
	errIndex  = &limitError{fmt.Sprintf("uses an array index over %d", MaxArrayIndex)}
	errNumber = &limitError{fmt.Sprintf("multiplies numbers beyond %d bits", MaxNumberBits)}
)

// bits is about how many bits a product with v needs: big integers grow
// with each multiplication, and multiplying two large ones is one step of
// superlinear time.
func bits(v any) int {
	switch x := v.(type) {
	case *big.Int:
		return x.BitLen()
	case json.Number:
		return len(x) * 4
	}
	return 64
}

func repetition(l, r any) (string, float64, bool) {
	s, ok := l.(string)
	if !ok {
		return "", 0, false
	}
	n, ok := number(r)
	return s, n, ok
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return math.Inf(1), true
		}
		return f, true
	}
	return 0, false
}

func tooLargeIndex(v any) bool {
	n, ok := number(v)
	return ok && n > MaxArrayIndex
}
