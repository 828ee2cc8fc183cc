package route

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

// How a program is rewritten before it is compiled so that its growing
// operations go through the checks of bound.go: the prelude that redefines
// collecting builtins, the refusal of what cannot be checked at run time,
// and the rewrite itself.

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
