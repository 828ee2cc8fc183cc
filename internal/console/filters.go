package console

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// Claim list bounds.
const (
	defaultLimit = 50
	maxLimit     = 500
	maxCursor    = 1024
	maxFilterLen = 255
	maxKeyLen    = 4096
)

// filterKeys are the claims list's filters, in the order a page shows them.
// changed_since bounds updated_at (claim.Search.ChangedSince): the link
// that follows what a bulk retry reopened sets it.
var filterKeys = []string{"status", "provider", "route", "type", "event_id", "business_key", "since", "before", "changed_since"}

// nameRE is a provider or route name, as the configuration allows them.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// badRequest is a filter or body the API answers 400 for; its message
// names the parameter.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// storable refuses, as a 400 naming its field, the first of fields (name,
// value pairs) whose value Postgres cannot store as text: not UTF-8, or
// holding NUL (SQLSTATE 22021 otherwise, a 500). Every path segment,
// filter and cursor of the API and the pages passes through it before any
// statement.
func storable(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if !claim.StorableText(fields[i+1]) {
			return bad("%s: must be UTF-8 text without NUL bytes", fields[i])
		}
	}
	return nil
}

// pathClaim returns the provider and event id a request's path names,
// refusing text Postgres cannot store.
func pathClaim(r *http.Request) (provider, eventID string, err error) {
	provider, eventID = r.PathValue("provider"), r.PathValue("event_id")
	return provider, eventID, storable("provider", provider, "event_id", eventID)
}

// pathRoute returns the route a request's path names, likewise.
func pathRoute(r *http.Request) (string, error) {
	name := r.PathValue("name")
	return name, storable("name", name)
}

// parseFilters reads the list filters from get (a query or a body), each
// validated, into a search. Values are never echoed back.
func parseFilters(get func(string) string) (claim.Search, error) {
	return parseFiltersAt(get, time.Now())
}

// agoRE is a time ago: a whole number of minutes, hours or days.
var agoRE = regexp.MustCompile(`^([1-9][0-9]{0,3})([mhd])$`)

// maxAgo bounds a time ago, so that it never overflows a Duration.
const maxAgo = 3660 * 24 * time.Hour

// parseWhen reads a since or before: an RFC 3339 time, or a time ago
// (30m, 1h, 24h, 7d) before now.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if m := agoRE.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := map[string]time.Duration{"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
		return now.Add(-min(time.Duration(n)*unit, maxAgo)), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// parseFiltersAt is parseFilters with times ago taken before now.
func parseFiltersAt(get func(string) string, now time.Time) (claim.Search, error) {
	var f claim.Search
	for _, k := range filterKeys {
		if err := storable(k, get(k)); err != nil {
			return f, err
		}
	}
	if v := get("status"); v != "" {
		switch s := claim.Status(v); s {
		case claim.Processing, claim.Completed, claim.Failed, claim.Ignored:
			f.Status = s
		default:
			return f, bad("status: must be processing, completed, failed or ignored")
		}
	}
	for _, n := range []struct {
		key string
		dst *string
	}{{"provider", &f.Provider}, {"route", &f.Route}} {
		if v := get(n.key); v != "" {
			if !nameRE.MatchString(v) {
				return f, bad("%s: must be a name of lower-case letters, digits, - or _ (at most 63)", n.key)
			}
			*n.dst = v
		}
	}
	if v := get("type"); v != "" {
		if len(v) > maxFilterLen || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return f, bad("type: must be printable ASCII without spaces, at most %d characters", maxFilterLen)
		}
		if strings.ContainsAny(v, `[]\`) {
			return f, bad("type: an event type, or a glob whose only wildcards are * and ?")
		}
		f.Type = v
	}
	if v := get("event_id"); v != "" {
		if len(v) > maxFilterLen || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return f, bad("event_id: must be a prefix, or a *substring*, of at most %d characters without control characters", maxFilterLen)
		}
		// *text* (or *text) is a substring; text or text* a prefix.
		if inner, ok := strings.CutPrefix(v, "*"); ok {
			f.EventIDContains = strings.TrimSuffix(inner, "*")
		} else {
			f.EventIDPrefix = strings.TrimSuffix(v, "*")
		}
		if f.EventIDContains == "" && f.EventIDPrefix == "" {
			return f, bad("event_id: a prefix or a *substring* needs at least one character besides *")
		}
	}
	if v := get("business_key"); v != "" {
		if len(v) > maxKeyLen {
			return f, bad("business_key: at most %d characters", maxKeyLen)
		}
		f.BusinessKey = v
	}
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{"since", &f.Since}, {"before", &f.Before}, {"changed_since", &f.ChangedSince}} {
		if v := get(t.key); v != "" {
			at, err := parseWhen(v, now)
			if err != nil {
				return f, bad("%s: want a time ago such as 1h, 24h or 7d, or an RFC 3339 time such as 2026-12-01T00:00:00Z", t.key)
			}
			*t.dst = at
		}
	}
	if !f.Since.IsZero() && !f.Before.IsZero() && !f.Since.Before(f.Before) {
		return f, bad("since: must be before before")
	}
	return f, nil
}

// parseList reads a claims list request: the filters, limit and cursor.
// Any other parameter is refused, so that a misspelt filter is not
// silently ignored.
func parseList(q url.Values) (claim.Search, error) {
	for k := range q {
		switch k {
		case "limit", "cursor", "status", "provider", "route", "type", "event_id", "business_key", "since", "before", "changed_since":
		default:
			return claim.Search{}, bad("unknown parameter %q: want %s, limit or cursor", cut(k, 64), strings.Join(filterKeys, ", "))
		}
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return claim.Search{}, bad("%s: given more than once", k)
		}
	}
	f, err := parseFilters(q.Get)
	if err != nil {
		return f, err
	}
	f.Limit = defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return f, bad("limit: must be a whole number from 1 to %d", maxLimit)
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		pos, back, err := decodeCursor(v)
		if err != nil {
			return f, err
		}
		if back {
			f.Newer = &pos
		} else {
			f.After = &pos
		}
	}
	return f, nil
}

// cursor is the position a page ended at, as next_cursor carries it, or
// (B set) the one a page began at, as prev_cursor does: the page before it.
type cursor struct {
	T time.Time `json:"t"`
	P string    `json:"p"`
	E string    `json:"e"`
	B bool      `json:"b,omitempty"`
}

func encodeCursor(p claim.Position) string {
	return cursorText(cursor{p.FirstSeenAt, p.Provider, p.EventID, false})
}

// encodePrevCursor is the cursor of the page before the one beginning at p.
func encodePrevCursor(p claim.Position) string {
	return cursorText(cursor{p.FirstSeenAt, p.Provider, p.EventID, true})
}

func cursorText(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns a cursor's position, and whether it asks for the
// page before it.
func decodeCursor(s string) (claim.Position, bool, error) {
	var c cursor
	if len(s) > maxCursor {
		return claim.Position{}, false, bad("cursor: not one this API handed out")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.T.IsZero() || c.P == "" || c.E == "" || storable("cursor", c.P+c.E) != nil {
		return claim.Position{}, false, bad("cursor: not one this API handed out")
	}
	return claim.Position{FirstSeenAt: c.T, Provider: c.P, EventID: c.E}, c.B, nil
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
