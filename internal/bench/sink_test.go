package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sink is an instant downstream on loopback. A path ending in /ok is
// answered {"ok":true} as JSON; any other, an empty 200. It notes when each event
// (Hookgate-Event-Id) first arrived and how often each Idempotency-Key came,
// so that a benchmark can wait for a drain in memory rather than by polling
// the database it is measuring.
type sink struct {
	*httptest.Server
	mu    sync.Mutex
	first map[string]time.Time
	keys  map[string]int
}

func newSink(b *testing.B) *sink {
	s := &sink{first: map[string]time.Time{}, keys: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if id := r.Header.Get("Hookgate-Event-Id"); s.first[id].IsZero() {
			s.first[id] = now
		}
		s.keys[r.Header.Get("Idempotency-Key")]++
		if strings.HasSuffix(r.URL.Path, "/ok") {
			// A downstream that reports its success in the body, as a
			// route's success program reads it.
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	}))
	b.Cleanup(s.Close)
	return s
}

// events is how many distinct events arrived.
func (s *sink) events() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.first)
}

// arrived is when the event id first arrived.
func (s *sink) arrived(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first[id]
}

// lastArrival is when the last of the events whose ids start with prefix
// first arrived.
func (s *sink) lastArrival(prefix string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for id, at := range s.first {
		if strings.HasPrefix(id, prefix) && at.After(last) {
			last = at
		}
	}
	return last
}

// effects is how many distinct Idempotency-Keys arrived.
func (s *sink) effects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// waitFor waits until the sink has seen want distinct events.
func (s *sink) waitFor(b *testing.B, want int) {
	b.Helper()
	require.EventuallyWithT(b, func(c *assert.CollectT) {
		require.GreaterOrEqual(c, s.events(), want, "events")
	}, 10*time.Minute, 5*time.Millisecond, "the downstream has not seen every event after ten minutes")
}
