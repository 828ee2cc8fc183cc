package route

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
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

// preludeDefs redefine the builtins that collect or assign what a closure
// yields (gojq's own definitions, in builtin.jq, are not rewritten), so that
// the rewrite reaches their insides. Each is gojq v0.12's definition; uses
// names the others it calls. A program gets only those it calls, since
// every definition costs each run a little.
var preludeDefs = []struct {
	name, src string
	uses      []string
}{
	{"map/1", `def map(f): [.[] | f];`, nil},
	{"add/1", `def add(f): [f] | add;`, nil},
	{"map_values/1", `def map_values(f): .[] |= f;`, nil},
	{"with_entries/1", `def with_entries(f): to_entries | map(f) | from_entries;`, []string{"map/1"}},
	{"min_by/1", `def min_by(f): _min_by(map([f]));`, []string{"map/1"}},
	{"max_by/1", `def max_by(f): _max_by(map([f]));`, []string{"map/1"}},
	{"sort_by/1", `def sort_by(f): _sort_by(map([f]));`, []string{"map/1"}},
	{"group_by/1", `def group_by(f): _group_by(map([f]));`, []string{"map/1"}},
	{"unique_by/1", `def unique_by(f): _unique_by(map([f]));`, []string{"map/1"}},
	{"combinations/1", `def combinations(n): [limit(n; repeat(.))] | combinations;`, nil},
	{"walk/1", `def walk(f): def _walk: if type == "array" then map(_walk) elif type == "object" then map_values(_walk) end | f; _walk;`,
		[]string{"map/1", "map_values/1"}},
	{"sub/3", `def sub($re; str; $flags): reduce match($re; $flags) as {$offset, $length, $captures}
  ({s: ., r: []}; reduce ($captures | _captures | str) as $s (.i = 0; .r[.i] += .s[.next:$offset] + $s | .i += 1) |
  .next = $offset + $length) | .r[] + .s[.next:] // .s;`, nil},
	{"sub/2", `def sub($re; str): sub($re; str; null);`, []string{"sub/3"}},
	{"gsub/3", `def gsub($re; str; $flags): sub($re; str; $flags + "g");`, []string{"sub/3"}},
	{"gsub/2", `def gsub($re; str): sub($re; str; "g");`, []string{"sub/3"}},
	{"fromstream/1", `def fromstream(f): foreach f as $pv (null; if .e then null end | $pv as [$p, $v] |
  if $pv | length == 2 then setpath(["v"] + $p; $v) | setpath(["e"]; $p | length == 0) else setpath(["e"]; $p | length == 1) end;
  if .e then .v else empty end);`, nil},
	{"pick/1", `def pick(f): . as $v | reduce path(f) as $p (null; setpath($p; $v | getpath($p)));`, nil},
}

// prelude returns the definitions of preludeDefs that q calls, with those
// they use, in an order where each comes after what it uses.
func prelude(q *gojq.Query) string {
	called := map[string]bool{}
	walkTerms(q, func(t *gojq.Term) {
		if t.Type == gojq.TermTypeFunc {
			called[t.Func.Name+"/"+strconv.Itoa(len(t.Func.Args))] = true
		}
	})
	for changed := true; changed; {
		changed = false
		for _, d := range preludeDefs {
			if !called[d.name] {
				continue
			}
			for _, u := range d.uses {
				if !called[u] {
					called[u], changed = true, true
				}
			}
		}
	}
	var b strings.Builder
	for _, d := range preludeDefs { // each after what it uses
		if called[d.name] {
			b.WriteString(d.src)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// checkProgram refuses, in q as written, what the bounds cannot check at
// run time: names the rewrite reserves, recursion in the program's own
// definitions (every call deepens gojq's stack, a step at a time, and a body
// value may choose the depth), and constant array indexes over
// MaxArrayIndex.
func checkProgram(q *gojq.Query) error {
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf(format, args...)
		}
	}
	walkQueries(q, func(q *gojq.Query) {
		for _, fd := range q.FuncDefs {
			if strings.HasPrefix(fd.Name, reservedFunc) {
				fail("defines %s: names starting with %s are reserved", fd.Name, reservedFunc)
			}
		}
		for _, p := range q.Patterns {
			walkPattern(p, func(name string) {
				if strings.HasPrefix(name, budgetVar) {
					fail("binds %s: names starting with %s are reserved", name, budgetVar)
				}
			})
		}
	}, func(t *gojq.Term) {
		if t.Type == gojq.TermTypeFunc && (strings.HasPrefix(t.Func.Name, reservedFunc) || strings.HasPrefix(t.Func.Name, budgetVar)) {
			fail("uses %s: names starting with %s or %s are reserved", t.Func.Name, reservedFunc, budgetVar)
		}
		for _, ix := range indexes(t) {
			if n, ok := constNumber(ix.Start); ok && !ix.IsSlice && n > MaxArrayIndex {
				fail("uses the array index %s, over the %d allowed", ix.Start, MaxArrayIndex)
			}
		}
	})
	if err != nil {
		return err
	}
	if name := recursive(q); name != "" {
		return fmt.Errorf("defines %s recursively: a program may not recurse, since the depth, and with it the memory, could come from a body", name)
	}
	return nil
}

// recursive returns the name of a definition of q that calls itself,
// directly or through others, or "". Calls are matched by name and arity,
// which may also take a parameter of the same name for a call.
func recursive(q *gojq.Query) string {
	calls := map[string]map[string]bool{}
	var order []string
	walkQueries(q, func(q *gojq.Query) {
		for _, fd := range q.FuncDefs {
			id := fd.Name + "/" + strconv.Itoa(len(fd.Args))
			if calls[id] == nil {
				calls[id] = map[string]bool{}
				order = append(order, id)
			}
			walkQueries(fd.Body, nil, func(t *gojq.Term) {
				if t.Type == gojq.TermTypeFunc {
					calls[id][t.Func.Name+"/"+strconv.Itoa(len(t.Func.Args))] = true
				}
			})
		}
	}, nil)
	for _, id := range order {
		seen := map[string]bool{}
		stack := []string{id}
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for g := range calls[f] {
				if g == id {
					return strings.Split(id, "/")[0]
				}
				if !seen[g] {
					seen[g] = true
					stack = append(stack, g)
				}
			}
		}
	}
	return ""
}

// rewrite makes q's growing operations checked, in place; see BuildBytes.
func rewrite(q *gojq.Query) {
	walkQueries(q, rewriteQuery, rewriteTerm)
}

func rewriteQuery(q *gojq.Query) {
	l, r := q.Left, q.Right
	switch q.Op {
	case gojq.OpAdd:
		// A number on either side adds numbers or fails; two strings
		// written in the program are a constant.
		if constNumberQ(l) || constNumberQ(r) || isLiteral(l, gojq.TermTypeString) && isLiteral(r, gojq.TermTypeString) {
			return
		}
		setChecked(q, gojq.OpAdd, l, r)
	case gojq.OpMul:
		if constNumberQ(l) && constNumberQ(r) {
			return
		}
		setChecked(q, gojq.OpMul, l, r)
	case gojq.OpUpdateAdd, gojq.OpUpdateMul:
		// l op= r is r as $x | l |= . op $x.
		if q.Op == gojq.OpUpdateAdd && constNumberQ(r) {
			return
		}
		op := gojq.OpAdd
		if q.Op == gojq.OpUpdateMul {
			op = gojq.OpMul
		}
		update := &gojq.Query{}
		setChecked(update, op, identity(), variable(budgetVar+"_u"))
		setBindModify(q, r, l, update)
	case gojq.OpAssign:
		// l = r sets every path of l to r's value; charge each, as l |= $x.
		if isConstant(r) {
			return
		}
		setBindModify(q, r, l, pipe(variable(budgetVar+"_u"), charge()))
	case gojq.OpUpdateAlt:
		// l //= r is l |= (. // $x).
		alt := &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeIf, If: &gojq.If{
			Cond: identity(), Then: identity(), Else: pipe(variable(budgetVar+"_u"), charge()),
		}}}
		setBindModify(q, r, l, alt)
	case gojq.OpModify:
		q.Right = pipe(r, charge())
	}
}

func rewriteTerm(t *gojq.Term) {
	for _, ix := range indexes(t) {
		if ix.IsSlice || ix.Start == nil || isConstant(ix.Start) {
			continue
		}
		ix.Start = pipe(ix.Start, call("_hg_index"))
	}
	switch t.Type {
	case gojq.TermTypeArray:
		if t.Array.Query != nil {
			t.Array.Query = pipe(t.Array.Query, charge())
		}
	case gojq.TermTypeObject:
		wrapTerm(t)
	case gojq.TermTypeString, gojq.TermTypeFormat:
		if t.Str != nil && len(t.Str.Queries) > 0 {
			wrapTerm(t)
		}
	case gojq.TermTypeFunc:
		if t.Func.Name == "setpath" && len(t.Func.Args) == 2 {
			t.Func.Args[0] = pipe(t.Func.Args[0], call("_hg_path"))
			t.Func.Args[1] = pipe(t.Func.Args[1], charge())
		}
	}
}

// setChecked makes q the checked form of l op r, inline:
//
//	r as $__hg_r | l as $__hg_l | [_hg_repeat($__hg; $__hg_l; $__hg_r) |] $__hg_l op $__hg_r | _hg_sized($__hg)
//
// The operands are evaluated as the operator evaluates them, right then
// left, so that several values come in the same order, and each sees the
// same input. Bindings inside l or r are scoped to them.
func setChecked(q *gojq.Query, op gojq.Operator, l, r *gojq.Query) {
	lv, rv := variable(budgetVar+"_l"), variable(budgetVar+"_r")
	result := pipe(&gojq.Query{Left: lv, Op: op, Right: rv}, sized())
	if op == gojq.OpMul {
		result = pipe(call("_hg_repeat", variable(budgetVar), lv, rv), result)
	}
	*q = gojq.Query{
		FuncDefs: q.FuncDefs,
		Left:     r,
		Patterns: []*gojq.Pattern{{Name: budgetVar + "_r"}},
		Op:       gojq.OpPipe,
		Right: &gojq.Query{
			Left:     l,
			Patterns: []*gojq.Pattern{{Name: budgetVar + "_l"}},
			Op:       gojq.OpPipe,
			Right:    result,
		},
	}
}

// wrapTerm makes t (t | _hg_sized($__hg)), keeping its suffixes outside.
func wrapTerm(t *gojq.Term) {
	inner := *t
	inner.SuffixList = nil
	*t = gojq.Term{Type: gojq.TermTypeQuery, Query: pipe(&gojq.Query{Term: &inner}, sized()), SuffixList: t.SuffixList}
}

// setBindModify makes q (value) as $__hg_u | path |= update.
func setBindModify(q, value, path, update *gojq.Query) {
	*q = gojq.Query{
		FuncDefs: q.FuncDefs,
		Left:     value,
		Patterns: []*gojq.Pattern{{Name: budgetVar + "_u"}},
		Op:       gojq.OpPipe,
		Right:    &gojq.Query{Left: path, Op: gojq.OpModify, Right: update},
	}
}

func call(name string, args ...*gojq.Query) *gojq.Query {
	return &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: name, Args: args}}}
}

func variable(name string) *gojq.Query { return call(name) }

func identity() *gojq.Query { return &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeIdentity}} }

func sized() *gojq.Query { return call("_hg_sized", variable(budgetVar)) }

func charge() *gojq.Query { return call("_hg_charge", variable(budgetVar)) }

func pipe(l, r *gojq.Query) *gojq.Query { return &gojq.Query{Left: l, Op: gojq.OpPipe, Right: r} }

// isLiteral reports whether q is one term of type typ with no suffix.
func isLiteral(q *gojq.Query, typ gojq.TermType) bool {
	if q == nil || q.Term == nil || len(q.FuncDefs) > 0 || q.Term.Type != typ || len(q.Term.SuffixList) > 0 {
		return false
	}
	return typ != gojq.TermTypeString || len(q.Term.Str.Queries) == 0
}

// isConstant reports whether q is a number, string, true, false or null
// written in the program.
func isConstant(q *gojq.Query) bool {
	for _, typ := range []gojq.TermType{gojq.TermTypeNumber, gojq.TermTypeString, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNull} {
		if isLiteral(q, typ) {
			return true
		}
	}
	return false
}

func constNumberQ(q *gojq.Query) bool { return isLiteral(q, gojq.TermTypeNumber) }

func constNumber(q *gojq.Query) (float64, bool) {
	if !constNumberQ(q) {
		return 0, false
	}
	f, err := strconv.ParseFloat(q.Term.Number, 64)
	return f, err == nil
}

// indexes returns the indexes of t: its own and its suffixes'.
func indexes(t *gojq.Term) []*gojq.Index {
	var out []*gojq.Index
	if t.Index != nil {
		out = append(out, t.Index)
	}
	for _, s := range t.SuffixList {
		if s.Index != nil {
			out = append(out, s.Index)
		}
	}
	return out
}

// walkQueries calls fq on every query and ft on every term of q, children
// first. Either may be nil.
func walkQueries(q *gojq.Query, fq func(*gojq.Query), ft func(*gojq.Term)) {
	w := walker{fq: fq, ft: ft}
	w.query(q)
}

// walkTerms calls f on every term of q.
func walkTerms(q *gojq.Query, f func(*gojq.Term)) { walkQueries(q, nil, f) }

type walker struct {
	fq func(*gojq.Query)
	ft func(*gojq.Term)
}

func (w walker) query(q *gojq.Query) {
	if q == nil {
		return
	}
	for _, fd := range q.FuncDefs {
		w.query(fd.Body)
	}
	w.term(q.Term)
	w.query(q.Left)
	w.query(q.Right)
	for _, p := range q.Patterns {
		w.pattern(p)
	}
	if w.fq != nil {
		w.fq(q)
	}
}

func (w walker) pattern(p *gojq.Pattern) {
	if p == nil {
		return
	}
	for _, e := range p.Array {
		w.pattern(e)
	}
	for _, o := range p.Object {
		w.str(o.KeyString)
		w.query(o.KeyQuery)
		w.pattern(o.Val)
	}
}

func (w walker) str(s *gojq.String) {
	if s != nil {
		for _, q := range s.Queries {
			w.query(q)
		}
	}
}

func (w walker) index(ix *gojq.Index) {
	if ix != nil {
		w.str(ix.Str)
		w.query(ix.Start)
		w.query(ix.End)
	}
}

func (w walker) term(t *gojq.Term) {
	if t == nil {
		return
	}
	w.index(t.Index)
	if t.Func != nil {
		for _, a := range t.Func.Args {
			w.query(a)
		}
	}
	if t.Object != nil {
		for _, kv := range t.Object.KeyVals {
			w.str(kv.KeyString)
			w.query(kv.KeyQuery)
			w.query(kv.Val)
		}
	}
	if t.Array != nil {
		w.query(t.Array.Query)
	}
	if t.Unary != nil {
		w.term(t.Unary.Term)
	}
	w.str(t.Str)
	if t.If != nil {
		w.query(t.If.Cond)
		w.query(t.If.Then)
		for _, e := range t.If.Elif {
			w.query(e.Cond)
			w.query(e.Then)
		}
		w.query(t.If.Else)
	}
	if t.Try != nil {
		w.query(t.Try.Body)
		w.query(t.Try.Catch)
	}
	if t.Reduce != nil {
		w.query(t.Reduce.Query)
		for _, p := range t.Reduce.Patterns {
			w.pattern(p)
		}
		w.query(t.Reduce.Start)
		w.query(t.Reduce.Update)
	}
	if t.Foreach != nil {
		w.query(t.Foreach.Query)
		for _, p := range t.Foreach.Patterns {
			w.pattern(p)
		}
		w.query(t.Foreach.Start)
		w.query(t.Foreach.Update)
		w.query(t.Foreach.Extract)
	}
	if t.Label != nil {
		w.query(t.Label.Body)
	}
	w.query(t.Query)
	for _, s := range t.SuffixList {
		w.index(s.Index)
	}
	if w.ft != nil {
		w.ft(t)
	}
}

func walkPattern(p *gojq.Pattern, f func(name string)) {
	if p == nil {
		return
	}
	if p.Name != "" {
		f(p.Name)
	}
	for _, e := range p.Array {
		walkPattern(e, f)
	}
	for _, o := range p.Object {
		if strings.HasPrefix(o.Key, "$") {
			f(o.Key)
		}
		walkPattern(o.Val, f)
	}
}
