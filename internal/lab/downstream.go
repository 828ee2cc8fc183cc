package lab

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// labEffectLatency is how long the lab downstream takes to perform an
// effect, as a real API call takes tens to hundreds of milliseconds. It is
// the window in which copies that looked before any of them recorded the
// event overlap.
const labEffectLatency = 100 * time.Millisecond

// maxLabBody bounds a request body the lab downstream or a design reads.
const maxLabBody = 64 << 10

// trapMode says where the lab downstream holds the first call for an event,
// so that the lab can kill the caller at that exact point.
type trapMode int

const (
	// trapBefore holds the call before the effect, and drops it afterwards:
	// the caller is killed after its claim and before the side effect.
	trapBefore trapMode = iota + 1
	// trapAfter performs the effect, then holds the answer: the caller is
	// killed after the side effect and before it records completion.
	trapAfter
)

// trap is a call held by the lab downstream.
type trap struct {
	mode    trapMode
	sprung  bool
	arrived chan struct{} // closed when the call is held
	release chan struct{} // closed by the lab once it has killed the caller
}

// labTally is what the lab downstream saw for one event.
type labTally struct {
	calls   int // requests received, held and dropped ones included
	effects int // side effects performed
	deduped int // requests answered without an effect, for a key already effected
}

// labDownstream is the side effect every design calls: it records each
// effect, per event id (the "id" of the JSON body every design forwards
// unchanged), and dedupes by Idempotency-Key only when a request carries
// one, as an API that supports keys would. Without a key every call is an
// effect.
type labDownstream struct {
	mu     sync.Mutex
	events map[string]*labTally
	keys   map[string]bool // Idempotency-Keys already effected
	traps  map[string]*trap
}

func newLabDownstream() *labDownstream {
	return &labDownstream{events: map[string]*labTally{}, keys: map[string]bool{}, traps: map[string]*trap{}}
}

// arm sets a trap for the first call of eventID.
func (d *labDownstream) arm(eventID string, mode trapMode) *trap {
	t := &trap{mode: mode, arrived: make(chan struct{}), release: make(chan struct{})}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.traps[eventID] = t
	return t
}

// tally returns what was seen for eventID.
func (d *labDownstream) tally(eventID string) labTally {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.events[eventID]; t != nil {
		return *t
	}
	return labTally{}
}

func (d *labDownstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		io.WriteString(w, `{"status":"ok"}`)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLabBody))
	var ev struct {
		ID string `json:"id"`
	}
	if err != nil || json.Unmarshal(body, &ev) != nil || ev.ID == "" || len(ev.ID) > 200 {
		http.Error(w, "a JSON body with an id is expected", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")

	t := d.arrive(ev.ID)
	if t != nil && t.mode == trapBefore {
		d.hold(r.Context(), t)
		// The caller was killed before the effect: nothing is performed.
		http.Error(w, "dropped", http.StatusServiceUnavailable)
		return
	}
	select {
	case <-time.After(labEffectLatency):
	case <-r.Context().Done():
		return
	}
	d.mu.Lock()
	tally := d.events[ev.ID]
	if key != "" && d.keys[key] {
		tally.deduped++
	} else {
		tally.effects++
		if key != "" {
			d.keys[key] = true
		}
	}
	d.mu.Unlock()
	if t != nil && t.mode == trapAfter {
		d.hold(r.Context(), t)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

// arrive counts a call for eventID and returns its trap when this call is
// the one to hold.
func (d *labDownstream) arrive(eventID string) *trap {
	d.mu.Lock()
	defer d.mu.Unlock()
	tally := d.events[eventID]
	if tally == nil {
		tally = &labTally{}
		d.events[eventID] = tally
	}
	tally.calls++
	t := d.traps[eventID]
	if t == nil || t.sprung {
		return nil
	}
	t.sprung = true
	return t
}

// hold tells the lab the call is held and waits until the lab releases it.
func (d *labDownstream) hold(ctx context.Context, t *trap) {
	close(t.arrived)
	select {
	case <-t.release:
	case <-ctx.Done():
	}
}
