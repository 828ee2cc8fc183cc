package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// shipperToken is what the fake shipping API wants after "Bearer ".
const shipperToken = "shp_test_token_e2e"

// shipment is what the fake shipping API accepts: an order and where it goes.
type shipment struct {
	Order     string `json:"order"`
	Reference string `json:"reference"`
	To        struct {
		Name    string `json:"name"`
		Country string `json:"country"`
	} `json:"to"`
}

// shipperCall is one request the fake shipping API received.
type shipperCall struct {
	key    string
	header http.Header
	body   []byte
	status int
}

// shipper is a fake shipping API, as strict as a real one: it requires a
// bearer token, reads its idempotency key from X-Idempotency-Key,
// validates the JSON it expects, answers {"id":"shp_..."} and, for a key
// it has seen succeed, the same shipment again without creating another.
type shipper struct {
	*httptest.Server
	mu        sync.Mutex
	calls     []*shipperCall
	byKey     map[string]string // key -> shipment id
	created   int
	failFirst map[string]int // key -> how many first calls answer 503
}

func newShipper(t *testing.T, start func(*httptest.Server)) *shipper {
	sh := &shipper{byKey: map[string]string{}, failFirst: map[string]int{}}
	sh.Server = httptest.NewUnstartedServer(http.HandlerFunc(sh.serve))
	start(sh.Server)
	t.Cleanup(sh.Close)
	return sh
}

// fail makes the first n calls with key answer 503.
func (sh *shipper) fail(key string, n int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.failFirst[key] = n
}

func (sh *shipper) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	c := &shipperCall{key: r.Header.Get("X-Idempotency-Key"), header: r.Header.Clone(), body: body}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.calls = append(sh.calls, c)
	answer := func(code int, v any) {
		c.status = code
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	var s shipment
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+shipperToken:
		answer(http.StatusUnauthorized, map[string]string{"error": "bad token"})
		return
	case c.key == "":
		answer(http.StatusBadRequest, map[string]string{"error": "X-Idempotency-Key is required"})
		return
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json":
		answer(http.StatusBadRequest, map[string]string{"error": "POST application/json only"})
		return
	case dec.Decode(&s) != nil || s.Order == "" || s.Reference == "" || s.To.Name == "" || s.To.Country == "":
		answer(http.StatusUnprocessableEntity, map[string]string{"error": "want {order, reference, to: {name, country}}"})
		return
	case sh.failFirst[c.key] > 0:
		sh.failFirst[c.key]--
		answer(http.StatusServiceUnavailable, map[string]string{"error": "try again"})
		return
	}
	id, seen := sh.byKey[c.key]
	if !seen {
		sh.created++
		id = fmt.Sprintf("shp_%d", sh.created)
		sh.byKey[c.key] = id
	}
	answer(http.StatusCreated, map[string]any{"id": id, "status": "created", "replayed": seen})
}

// callsFor returns the calls made with key, in order.
func (sh *shipper) callsFor(key string) []*shipperCall {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var out []*shipperCall
	for _, c := range sh.calls {
		if c.key == key {
			out = append(out, c)
		}
	}
	return out
}

// shipments returns how many shipments were created.
func (sh *shipper) shipments() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.created
}
