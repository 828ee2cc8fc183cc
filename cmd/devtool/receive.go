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

	mu      sync.Mutex // guards the fields below, so lines never interleave
	out     io.Writer
	seen    map[string]int // deliveries per Idempotency-Key
	unkeyed int            // deliveries without one, each taken as new
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
	mux.HandleFunc("POST /", r.handleDelivery)
	return mux
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
