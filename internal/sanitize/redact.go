package sanitize

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted is what a secret's value is replaced with.
const Redacted = "[redacted]"

// MinSecretLen is the shortest value a Redactor looks for, in any form: a
// shorter "secret" is guessable anyway, and replacing every occurrence of a
// two-letter string would make every message unreadable.
const MinSecretLen = 4

// Redactor removes known secret values from text: from what a downstream
// answered (it may echo the credentials it was sent), from error reasons and
// from log lines. Each value is looked for as it is and in the forms a
// downstream is likely to echo it in: URL-encoded (query and path forms,
// either case of hex), JSON-escaped (with and without HTML escapes, with
// escaped slashes), and, for an Authorization-style "Scheme credentials"
// value, the credentials alone (a Basic value also decoded, and its
// password).
//
// The nil *Redactor redacts nothing. A Redactor is safe for concurrent use,
// Add included: a secret read again from its file joins it at once.
type Redactor struct {
	mu    sync.Mutex // serializes Add
	seen  map[string]bool
	state atomic.Pointer[redactorState]
}

// redactorState is one Redactor's forms and their replacer, swapped whole
// when Add brings new ones.
type redactorState struct {
	forms    []string // every form, longest first
	replacer *strings.Replacer
}

// NewRedactor returns a Redactor of values. Values shorter than
// MinSecretLen are ignored; with none left it redacts nothing until Add
// brings one.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{seen: map[string]bool{}}
	r.Add(values...)
	return r
}

// Add makes r redact values too, from its next call on. It costs a rebuild
// of r's replacer, so it is for a secret that changed, not for every call.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var forms []string
	if st := r.state.Load(); st != nil {
		forms = slices.Clone(st.forms)
	}
	n := len(forms)
	for _, v := range values {
		for _, s := range derived(v) {
			for _, f := range encodings(s) {
				if len(f) >= MinSecretLen && !r.seen[f] {
					r.seen[f] = true
					forms = append(forms, f)
				}
			}
		}
	}
	if len(forms) == n {
		return
	}
	// Longest first, so that a form containing another is replaced whole.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	r.state.Store(&redactorState{forms: forms, replacer: strings.NewReplacer(pairs...)})
}

// current is r's state; nil when r redacts nothing.
func (r *Redactor) current() *redactorState {
	if r == nil {
		return nil
	}
	return r.state.Load()
}

// derived is v and the parts of it a downstream might quote on their own.
func derived(v string) []string {
	out := []string{v}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "=,:") {
		return out
	}
	cred = strings.TrimSpace(cred)
	out = append(out, cred)
	if strings.EqualFold(scheme, "Basic") {
		if raw, err := base64.StdEncoding.DecodeString(cred); err == nil {
			out = append(out, string(raw))
			if _, pass, ok := strings.Cut(string(raw), ":"); ok {
				out = append(out, pass)
			}
		}
	}
	return out
}

// encodings is s as it is, URL-encoded and JSON-escaped.
func encodings(s string) []string {
	out := []string{s}
	for _, e := range []string{url.QueryEscape(s), url.PathEscape(s), strings.ReplaceAll(url.QueryEscape(s), "+", "%20")} {
		out = append(out, e, lowerHex(e))
	}
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	html, _ := json.Marshal(s)
	for _, j := range []string{strings.TrimSpace(plain.String()), string(html)} {
		j = j[1 : len(j)-1] // the quotes
		out = append(out, j, strings.ReplaceAll(j, "/", `\/`))
	}
	return out
}

// lowerHex is a URL-encoded s with its %XX escapes in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// String returns s with every form of every secret replaced by Redacted.
func (r *Redactor) String(s string) string {
	st := r.current()
	if st == nil || s == "" {
		return s
	}
	return st.replacer.Replace(s)
}

// Head is String for the first bytes of a longer text, cut at the end of
// head when truncated: a secret that starts before the cut and goes on
// beyond it is redacted too, by treating a trailing prefix of any form as
// the secret. Cut such text only after redacting it, never before.
func (r *Redactor) Head(head []byte, truncated bool) []byte {
	st := r.current()
	if st == nil || len(head) == 0 {
		return head
	}
	s := st.replacer.Replace(string(head))
	if truncated {
		s = st.trailingPrefix(s)
	}
	return []byte(s)
}

// trailingPrefix replaces the longest proper prefix of a form that s ends with.
func (st *redactorState) trailingPrefix(s string) string {
	longest := 0
	for _, f := range st.forms {
		for k := min(len(f)-1, len(s)); k > longest; k-- {
			if strings.HasSuffix(s, f[:k]) {
				longest = k
				break
			}
		}
	}
	if longest == 0 {
		return s
	}
	return s[:len(s)-longest] + Redacted
}

// Handler returns a slog.Handler that redacts the message and every string,
// error and []byte attribute before passing a record to next. It is the
// last line of defence: text that may hold a secret is redacted where it is
// made, before it is stored or logged.
func (r *Redactor) Handler(next slog.Handler) slog.Handler {
	if r == nil {
		return next
	}
	return &redactHandler{r: r, next: next}
}

type redactHandler struct {
	r    *Redactor
	next slog.Handler
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &redactHandler{r: h.r, next: h.next.WithAttrs(red)}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{r: h.r, next: h.next.WithGroup(name)}
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		red := make([]any, len(group))
		for i, g := range group {
			red[i] = h.attr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case []byte:
			return slog.String(a.Key, h.r.String(string(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
