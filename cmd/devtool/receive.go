package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// receiverAddr is where `devtool run` serves the demo receiver; the example
// config's demo-receiver route points at it.
const receiverAddr = "127.0.0.1:9099"

// maxDeliveryBytes bounds a delivery body the receiver reads.
const maxDeliveryBytes = 10 << 20

// maxFailFor bounds how long `POST /demo/fail` may make the receiver fail.
const maxFailFor = 10 * time.Minute

// receive is `devtool receive`: it serves a receiver until ctx ends.
func receive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := devlocal.NewFlagSet("receive", "receive [--listen ADDR]", stderr)
	listen := fs.String("listen", receiverAddr, "address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("receive takes no arguments, got %q", fs.Args())
	}
	rcv := newReceiver(stdout)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: rcv.routes(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "demo receiver on http://%s: POST to any path is a delivery; GET /healthz\n", ln.Addr())

	if err := devlocal.Serve(ctx, srv, ln); err != nil {
		return err
	}
	effects, repeats := rcv.counts()
	fmt.Fprintf(stdout, "demo receiver stopped; new effects: %d, repeats ignored: %d\n", effects, repeats)
	return nil
}

// receiver is the demo downstream. It performs an "effect" for each
// Idempotency-Key it has not seen and ignores a repeat, as a real downstream
// that dedupes would, and prints a line for each delivery saying which.
type receiver struct {
	now func() time.Time

	mu        sync.Mutex // guards the fields below, so lines never interleave
	out       io.Writer
	seen      map[string]int // deliveries per Idempotency-Key
	unkeyed   int            // deliveries without one, each taken as new
	failUntil time.Time      // until then every delivery is answered 503 (POST /demo/fail)
}

func newReceiver(out io.Writer) *receiver {
	return &receiver{now: time.Now, out: out, seen: map[string]int{}}
}

// routes lists every endpoint the receiver serves.
func (r *receiver) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("POST /demo/fail", r.handleFail)
	mux.HandleFunc("DELETE /demo/fail", r.handleFail)
	mux.HandleFunc("POST /", r.handleDelivery)
	return mux
}

// handleFail makes the receiver answer every delivery 503 for the duration
// in `for` (POST /demo/fail?for=90s, at most maxFailFor), or stops that at
// once (DELETE), so a new user can watch retries, the route's circuit
// opening and closing, and a failed claim to retry by hand.
func (r *receiver) handleFail(w http.ResponseWriter, req *http.Request) {
	var until time.Time
	if req.Method == http.MethodPost {
		d, err := time.ParseDuration(req.URL.Query().Get("for"))
		if err != nil || d <= 0 || d > maxFailFor {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"for must be a duration from 1s to %s, e.g. for=90s"}`, maxFailFor)
			return
		}
		until = r.now().Add(d)
	}
	r.mu.Lock()
	r.failUntil = until
	if until.IsZero() {
		fmt.Fprintf(r.out, "%s answering deliveries again\n", r.now().Format("15:04:05"))
	} else {
		fmt.Fprintf(r.out, "%s failing on purpose: every delivery is answered 503 until %s\n", r.now().Format("15:04:05"), until.Format("15:04:05"))
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if until.IsZero() {
		io.WriteString(w, `{"failing_until":null}`)
		return
	}
	fmt.Fprintf(w, `{"failing_until":%q}`, until.UTC().Format(time.RFC3339))
}

// handleDelivery accepts a delivery on any path and answers 200.
func (r *receiver) handleDelivery(w http.ResponseWriter, req *http.Request) {
	size, err := io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, maxDeliveryBytes))
	if err != nil {
		http.Error(w, `{"ok":false,"error":"could not read the body"}`, http.StatusBadRequest)
		return
	}
	key := req.Header.Get("Idempotency-Key")

	r.mu.Lock()
	if now := r.now(); now.Before(r.failUntil) {
		fmt.Fprintf(r.out, "%s POST %s key=%s route=%s event=%s attempt=%s -> 503, failing on purpose until %s (no effect)\n",
			now.Format("15:04:05"), req.URL.Path, orDash(key), orDash(req.Header.Get("Hookgate-Route")),
			orDash(req.Header.Get("Hookgate-Event-Id")), orDash(req.Header.Get("Hookgate-Attempt")), r.failUntil.Format("15:04:05"))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"ok":false,"error":"the demo receiver is failing on purpose"}`)
		return
	}
	outcome := "new effect"
	switch {
	case key == "":
		r.unkeyed++
		outcome = "new effect (no Idempotency-Key, so a repeat could not be told apart)"
	default:
		r.seen[key]++
		if n := r.seen[key]; n > 1 {
			outcome = fmt.Sprintf("repeat of key %s (delivery %d; ignored, as a real downstream would dedupe)", short(key), n)
		}
	}
	fmt.Fprintf(r.out, "%s POST %s key=%s route=%s event=%s attempt=%s body=%dB -> %s\n",
		r.now().Format("15:04:05"), req.URL.Path, orDash(key),
		orDash(req.Header.Get("Hookgate-Route")), orDash(req.Header.Get("Hookgate-Event-Id")),
		orDash(req.Header.Get("Hookgate-Attempt")), size, outcome)
	r.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

// counts returns how many deliveries were new effects and how many were
// repeats of a key already seen.
func (r *receiver) counts() (effects, repeats int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	effects = r.unkeyed
	for _, n := range r.seen {
		effects++
		repeats += n - 1
	}
	return effects, repeats
}

// short abbreviates a long key for a line that already shows it whole.
func short(key string) string {
	if len(key) <= 16 {
		return key
	}
	return key[:16] + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
