package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// labHandler is one hand-built design of the lab: it takes a webhook
// (its event id and raw body) and answers the provider's status code, having
// called the lab downstream or not. Each design keeps its own table.
type labHandler interface {
	// setup creates the design's table if it is not there.
	setup(ctx context.Context) error
	// handle processes one delivery of the event and returns the status
	// answered to the provider: 2xx acknowledges it, anything else asks for
	// a retry.
	handle(ctx context.Context, eventID string, body []byte) int
	// record reads what the design's table says of the event: whether it
	// holds the event at all, and whether it took it for done.
	record(ctx context.Context, eventID string) (claimed, completed bool, err error)
}

// designTable is a design's own table in the lab's database, which setup
// creates if it is not there; each of designs 1–4 keeps its records in one.
type designTable struct {
	db      *pgxpool.Pool
	table   string
	columns string // the column list of its CREATE TABLE
}

func (t designTable) setup(ctx context.Context) error {
	_, err := t.db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t.table+" (\n"+t.columns+"\n)")
	return err
}

// labDesignDeps is what every design is built from.
type labDesignDeps struct {
	db    *pgxpool.Pool
	call  *labCaller
	lease time.Duration
}

// newLabHandler returns the design named name.
func newLabHandler(name string, deps labDesignDeps) (labHandler, error) {
	switch name {
	case designLookup:
		return &lookupDesign{designTable: designTable{deps.db, "lab_lookup", lookupColumns}, call: deps.call}, nil
	case designSeen:
		return &seenDesign{designTable: designTable{deps.db, "lab_seen", seenColumns}, call: deps.call}, nil
	case designLease:
		return &leaseDesign{designTable: designTable{deps.db, "lab_lease", leaseColumns}, call: deps.call, lease: deps.lease}, nil
	case designLeaseKey:
		return &leaseDesign{designTable: designTable{deps.db, "lab_lease_key", leaseColumns}, call: deps.call, lease: deps.lease, keyed: true}, nil
	}
	return nil, fmt.Errorf("no design %q", name)
}

// DesignCommand names devtool's hidden command that runs ServeDesign; the
// lab starts devtool's own binary with it, one process a design.
const DesignCommand = "lab-design"

// ServeDesign is the hidden `devtool lab-design` command: it serves one
// design at POST /webhooks/lab until ctx ends (or it is killed, which is
// the point), against the database DATABASE_URL names.
func ServeDesign(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := devlocal.NewFlagSet("lab-design", "lab-design --design NAME --listen ADDR --downstream URL", stderr)
	name := fs.String("design", "", "the design to serve")
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	downstream := fs.String("downstream", "", "URL of the lab downstream")
	lease := fs.Duration("lease", labLease, "how long a claim is held before another delivery may take it over")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *downstream == "" || getenv("DATABASE_URL") == "" {
		return errors.New("lab-design needs --downstream and DATABASE_URL")
	}
	db, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer db.Close()
	call := newLabCaller(*downstream)
	defer call.client.CloseIdleConnections()
	h, err := newLabHandler(*name, labDesignDeps{db: db, call: call, lease: *lease})
	if err != nil {
		return err
	}
	if err := h.setup(ctx); err != nil {
		return fmt.Errorf("creating the %s design's table: %w", *name, err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /webhooks/lab", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLabBody))
		id := r.Header.Get("webhook-id")
		if err != nil || id == "" || len(id) > 200 {
			http.Error(w, "a body and a webhook-id header are expected", http.StatusBadRequest)
			return
		}
		code := h.handle(r.Context(), id, body)
		w.WriteHeader(code)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "design %s on http://%s\n", *name, ln.Addr())
	return devlocal.Serve(ctx, srv, ln)
}

// labCaller performs the side effect: one POST of the event's body to the
// lab downstream.
type labCaller struct {
	url    string
	client *http.Client
}

func newLabCaller(url string) *labCaller {
	// No kept-alive connections: net/http would otherwise resend a request
	// carrying an Idempotency-Key on another connection when a reused one
	// fails, a retry the design did not decide on.
	return &labCaller{url: url, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// effect calls the downstream, with key as its Idempotency-Key unless key is
// "", and reports whether it answered 2xx.
func (c *labCaller) effect(ctx context.Context, body []byte, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("downstream answered %d", resp.StatusCode)
	}
	return nil
}
