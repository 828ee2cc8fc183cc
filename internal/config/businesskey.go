package config

import (
	"errors"
	"fmt"
	"strings"
)

// Business-key sources, the entries of Route.BusinessKey.
const (
	// KeyFromType takes the event's normalized type.
	KeyFromType = "type"
	// KeyFromJSON prefixes a dotted path of object keys into the JSON body.
	KeyFromJSON = "json:"
	// KeyFromHeader prefixes a request header's name.
	KeyFromHeader = "header:"
)

// validBusinessKey checks a route's business_key: at least one source, each
// type, json:dotted.path or header:NAME, none twice, and not type alone
// (every event of a type would share one key, so only the first would ever
// be delivered).
func (v *validator) validBusinessKey(key string, sources []string) {
	if sources == nil {
		return
	}
	if len(sources) == 0 {
		v.add(key, "must list at least one source (type, json:dotted.path or header:NAME), or be left out")
		return
	}
	seen := map[string]bool{}
	onlyType := true
	for i, s := range sources {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := validKeySource(s); err != nil {
			v.add(k, "%q %v", s, err)
			onlyType = false // one problem at a time
			continue
		}
		if seen[s] {
			v.add(k, "%q is listed twice", s)
		}
		seen[s] = true
		onlyType = onlyType && s == KeyFromType
	}
	if onlyType {
		v.add(key, "lists only type: every event of a type would share one key and only the first would ever be delivered; add the object it is about, e.g. json:data.object.id")
	}
}

func validKeySource(s string) error {
	const want = "must be type, json:dotted.path or header:NAME"
	switch {
	case s == KeyFromType:
		return nil
	case strings.HasPrefix(s, KeyFromJSON):
		path := strings.TrimPrefix(s, KeyFromJSON)
		for seg := range strings.SplitSeq(path, ".") {
			if seg == "" || strings.ContainsAny(seg, " \t\r\n") {
				return errors.New(want + " (a path of object keys separated by single dots)")
			}
		}
		return nil
	case strings.HasPrefix(s, KeyFromHeader):
		name := strings.TrimPrefix(s, KeyFromHeader)
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenRune(r) }) >= 0 {
			return errors.New(want + " (a header name of letters, digits and -)")
		}
		return nil
	}
	return errors.New(want)
}

func isTokenRune(r rune) bool {
	return r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}
