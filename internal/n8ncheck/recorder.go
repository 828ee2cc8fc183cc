package n8ncheck

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// recorder is the APIs the check's workflows and the worked example call:
// it performs one effect per Idempotency-Key, as a downstream should.
type recorder struct {
	mu          sync.Mutex
	shipperAuth string
	log         *devlocal.Console         // each call, for the log file
	calls       map[string]int            // path -> requests
	byKey       map[string]map[string]int // path -> key -> requests
	effects     map[string]int            // path -> effects
	bodies      map[string][]byte         // path -> last body
	keys        map[string]string         // path -> last key
}

// newRecorder returns a recorder that has seen no request yet.
func newRecorder() *recorder {
	return &recorder{calls: map[string]int{}, byKey: map[string]map[string]int{}, effects: map[string]int{},
		bodies: map[string][]byte{}, keys: map[string]string{}}
}

// ServeHTTP answers one call to the check's APIs: it counts the call by
// path and key, fails the calls a scenario wants failed, and performs the
// effect on a key's first success only.
func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	path, key := strings.TrimPrefix(req.URL.Path, "/"), req.Header.Get("Idempotency-Key")
	if strings.HasPrefix(path, "v1/shipments") {
		key = req.Header.Get("X-Idempotency-Key")
		if req.Header.Get("Authorization") != r.shipperAuth {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log != nil {
		r.log.Printf("api", "%s key=%s from=%s", path, key, req.RemoteAddr)
	}
	r.calls[path]++
	if r.byKey[path] == nil {
		r.byKey[path] = map[string]int{}
	}
	r.byKey[path][key]++
	n := r.byKey[path][key]
	r.bodies[path], r.keys[path] = body, key
	code := http.StatusOK
	switch {
	case key == "":
		code = http.StatusBadRequest
	case path == "effect/hg-failing" && n <= 2, path == "effect/hg-respond-success" && n <= 2, path == "effect/hg-respond-node":
		code = http.StatusInternalServerError
	case path == "v1/shipments" && n == 1:
		code = http.StatusServiceUnavailable
	}
	if code/100 == 2 && n == firstSuccess(path) {
		r.effects[path]++
	}
	w.Header().Set("Content-Type", "application/json")
	if path == "v1/shipments" && code/100 == 2 {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"shp_8812","status":"created"}`)
		return
	}
	if path == labelPath && code/100 == 2 {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"tracking_number":"`+trackingNumber+`"}`)
		return
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"ok":%t}`, code/100 == 2)
}

// The worked example's second step: the label of the shipment the first
// created, and the tracking number it answers.
const (
	labelPath      = "v1/shipments/shp_8812/label"
	trackingNumber = "1Z999AA10123456784"
)

// firstSuccess is the request number of key's first 2xx at path: the
// request that performs its effect.
func firstSuccess(path string) int {
	switch {
	case path == "effect/hg-failing", path == "effect/hg-respond-success":
		return 3
	case path == "v1/shipments":
		return 2
	}
	return 1
}

// stats returns how many requests path had and how many effects they
// performed.
func (r *recorder) stats(path string) (calls, effects int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[path], r.effects[path]
}

// callsWith counts the requests to path that carried key.
func (r *recorder) callsWith(path, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[path][key]
}

// last returns the key and body of path's latest request: what the
// workflow passed on to the API.
func (r *recorder) last(path string) (key string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[path], r.bodies[path]
}

// repeated lists the keys path was called with more than once.
func (r *recorder) repeated(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, n := range r.byKey[path] {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", cut(k, 16), n))
		}
	}
	slices.Sort(out)
	return out
}
