package reconcile_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeStripe serves GET /v1/events as Stripe documents it: Bearer auth,
// created[gte], types[], limit (at most 100), starting_after, newest first,
// {object: "list", data, has_more}.
type fakeStripe struct {
	*httptest.Server
	key string

	mu       sync.Mutex
	events   []map[string]any // newest first
	requests []url.Values
	// limited answers this many requests 429 with Retry-After: 1 first.
	limited int
	// hold, when set, is waited on by each request before it answers.
	hold chan struct{}
	// entered hears of each request as it arrives, when set.
	entered chan struct{}
}

func newFakeStripe(t *testing.T, key string) *fakeStripe {
	t.Helper()
	f := &fakeStripe{key: key}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// add adds an event created at, of type typ, newest first.
func (f *fakeStripe) add(id, typ string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := map[string]any{"id": id, "object": "event", "api_version": "2025-01-27.acacia", "created": at.Unix(),
		"type": typ, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": map[string]any{"id": "in_" + id, "object": "invoice", "customer": "cus_" + id}}}
	f.events = append(f.events, ev)
	slices.SortStableFunc(f.events, func(a, b map[string]any) int { return int(b["created"].(int64) - a["created"].(int64)) })
}

// raw is event id's JSON as the API lists it.
func (f *fakeStripe) raw(t *testing.T, id string) []byte {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range f.events {
		if ev["id"] == id {
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no event %s", id)
	return nil
}

func (f *fakeStripe) queries() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.hold != nil {
		<-f.hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		w.WriteHeader(http.StatusUnauthorized)
		// Stripe quotes the key it was given.
		fmt.Fprintf(w, `{"error":{"message":"Invalid API Key provided: %s","type":"invalid_request_error"}}`,
			r.Header.Get("Authorization"))
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	f.requests = append(f.requests, q)
	if f.limited > 0 {
		f.limited--
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Too many requests","type":"rate_limit_error"}}`)
		return
	}
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit < 1 || limit > 100 {
		limit = 10
	}
	var types []string
	for k, v := range q {
		if len(k) > 5 && k[:6] == "types[" {
			types = append(types, v...)
		}
	}
	var page []map[string]any
	started := q.Get("starting_after") == ""
	more := false
	for _, ev := range f.events {
		if !started {
			started = ev["id"] == q.Get("starting_after")
			continue
		}
		if ev["created"].(int64) < gte || (len(types) > 0 && !slices.Contains(types, ev["type"].(string))) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, ev)
	}
	if page == nil {
		page = []map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "url": "/v1/events", "data": page, "has_more": more})
}

// fakeGitHub serves a hook's deliveries as GitHub documents them: Bearer
// auth, per_page, newest first, the next page's cursor in the Link
// header, and the redelivery POST .../deliveries/{id}/attempts (202).
type fakeGitHub struct {
	*httptest.Server
	token string
	hook  string // "repos/acme/shop/hooks/123"
	// auth, when set, checks the Authorization header instead of token.
	auth func(string) bool

	mu          sync.Mutex
	deliveries  []map[string]any // newest first
	redelivered []string         // the paths POSTed
	pages       int
}

func newFakeGitHub(t *testing.T, token, hook string) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{token: token, hook: hook}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// add adds a delivery, newest first.
func (f *fakeGitHub) add(id int64, guid string, status int, redelivery bool, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliveries = append(f.deliveries, map[string]any{"id": id, "guid": guid, "delivered_at": at.UTC().Format(time.RFC3339),
		"redelivery": redelivery, "duration": 0.27, "status": http.StatusText(status), "status_code": status,
		"event": "push", "action": nil, "installation_id": nil, "repository_id": 42})
	slices.SortStableFunc(f.deliveries, func(a, b map[string]any) int {
		return compareStrings(b["delivered_at"].(string), a["delivered_at"].(string))
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeGitHub) posts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.redelivered)
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	ok := r.Header.Get("Authorization") == "Bearer "+f.token
	if f.auth != nil {
		ok = f.auth(r.Header.Get("Authorization"))
	}
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":"Bad credentials %s","documentation_url":"https://docs.github.com/rest"}`, r.Header.Get("Authorization"))
		return
	}
	base := "/" + f.hook + "/deliveries"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == base:
		f.list(w, r)
	case r.Method == http.MethodPost && len(r.URL.Path) > len(base) && r.URL.Path[:len(base)] == base:
		f.redelivered = append(f.redelivered, r.URL.Path)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
	}
}

// list answers one page; the cursor is the index of the page's first
// delivery, as opaque to the client as GitHub's.
func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	f.pages++
	perPage, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if perPage < 1 || perPage > 100 {
		perPage = 30
	}
	from := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		from, _ = strconv.Atoi(c)
	}
	to := min(from+perPage, len(f.deliveries))
	if to < len(f.deliveries) {
		next := fmt.Sprintf("%s%s?per_page=%d&cursor=%d", f.URL, r.URL.Path, perPage, to)
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	page := f.deliveries[from:to]
	if page == nil {
		page = []map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(page)
}
