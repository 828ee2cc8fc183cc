package route

import (
	"strings"

	"github.com/itchyny/gojq"
)

// Walking a parsed program: every query, term, pattern and string of it,
// children first.

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
