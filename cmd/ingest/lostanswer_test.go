package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestCommittedClaimWhoseAnswerWasLost: Postgres commits a claim, and the
// answer to the COMMIT never reaches ingest (as when the server is killed
// or frozen, or the network drops, between the commit and its answer). The
// claim timeout fires, and the provider hears 503 for an event that is in
// fact committed: its outcome was unknown. The provider's retry is then a
// duplicate: 200 {"duplicate":true}, one claim, its deliveries and jobs
// once. A 503 means "retry"; nothing is lost or acted on twice.
func TestCommittedClaimWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	proxy := startLostAnswerProxy(t, db.URL)
	s := start(t, proxy.url, nil)
	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_warm", "invoice.paid"), stripeSecret, time.Now())).body)

	event := signStripe(stripeEvent("evt_lost_answer", "invoice.paid"), stripeSecret, time.Now())
	proxy.armed.Store(true)
	r := s.post(t, event)
	select {
	case <-proxy.lost:
	default:
		t.Fatal("no COMMIT went through the proxy while it was armed")
	}
	require.Equal(t, http.StatusServiceUnavailable, r.status, "the commit's outcome was unknown when the claim timeout fired")

	c, ok := s.claimRow(t, "stripe", "evt_lost_answer")
	require.True(t, ok, "yet the claim was committed")
	require.Equal(t, "processing", c.Status)
	deliveries := map[string]string{"ship-order": "processing", "ledger": "processing"}
	require.Equal(t, deliveries, s.deliveries(t, "stripe", "evt_lost_answer"))
	// One job per delivery, of the warm-up event and of this one.
	var jobs []claim.DeliveryArgs
	for _, id := range []string{"evt_warm", "evt_lost_answer"} {
		for route := range deliveries {
			jobs = append(jobs, claim.DeliveryArgs{Provider: "stripe", EventID: id, Route: route})
		}
	}
	s.requireJobs(t, jobs...)

	r = s.post(t, event)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, duplicate, r.body, "the provider's retry finds the committed claim")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM webhook_event_claims WHERE event_id = 'evt_lost_answer'`))
	require.Equal(t, deliveries, s.deliveries(t, "stripe", "evt_lost_answer"), "the deliveries once")
	s.requireJobs(t, jobs...) // not one more for the retry
}

// lostAnswerProxy forwards TCP connections to a Postgres server. Once
// armed, the next connection to send COMMIT has it delivered, and every
// byte the server sends back on that connection afterwards dropped: the
// commit takes effect, and its client never hears.
type lostAnswerProxy struct {
	url   string // the database's URL, through the proxy
	armed atomic.Bool
	lost  chan struct{} // closed once a COMMIT's answer is being dropped

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startLostAnswerProxy(t *testing.T, databaseURL string) *lostAnswerProxy {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable") // so that the proxy reads plain protocol messages
	u.RawQuery = q.Encode()
	p := &lostAnswerProxy{url: u.String(), lost: make(chan struct{}), conns: map[net.Conn]bool{}}
	p.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(client, target) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *lostAnswerProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = true
}

// serve relays one connection. Messages from the client are read whole,
// so that a COMMIT (a simple-protocol Query, as pgx sends it) is seen
// before it is passed on; the server's bytes are relayed as they come,
// unless this connection's answer is being lost.
func (p *lostAnswerProxy) serve(client net.Conn, target string) {
	defer client.Close()
	p.track(client)
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	p.track(server)
	var dropping atomic.Bool
	p.wg.Go(func() {
		defer client.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !dropping.Load() {
				if _, err := client.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})

	r := bufio.NewReader(client)
	// The startup packet has no type byte: a length, then the rest.
	if err := relay(r, server); err != nil {
		return
	}
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		body, err := read(r)
		if err != nil {
			return
		}
		if typ == 'Q' && bytes.HasPrefix(bytes.ToLower(body), []byte("commit")) && p.armed.CompareAndSwap(true, false) {
			// Set before the COMMIT reaches the server, so that no byte
			// of its answer gets through.
			dropping.Store(true)
			close(p.lost)
		}
		if _, err := server.Write(message(typ, body)); err != nil {
			return
		}
	}
}

// relay passes the startup packet, which has no type byte, from r to w.
func relay(r *bufio.Reader, w io.Writer) error {
	body, err := read(r)
	if err != nil {
		return err
	}
	_, err = w.Write(message(0, body))
	return err
}

// read reads a message's length and body, the type byte already read.
func read(r *bufio.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 4 || n > 64<<20 {
		return nil, errors.New("malformed message length")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// message encodes a message: its type byte (none for 0), length and body.
func message(typ byte, body []byte) []byte {
	var msg []byte
	if typ != 0 {
		msg = append(msg, typ)
	}
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(body)+4))
	return append(msg, body...)
}
