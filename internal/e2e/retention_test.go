package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// The seed's test 6: deliver an event, let retention delete its claim, and
// have the provider send it again. It is claimed anew and delivered with the
// same Idempotency-Key, so a downstream that remembers keys has one effect.
func TestReplayAfterRetention(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}},
		setting{"retention.claims", "1s"}, setting{"retention.payloads", "1s"})
	ingest, _ := s.ingest(), s.worker()
	e := event{id: "evt_replayed", typ: "order.paid"}

	s.claimed(ingest, e)
	s.waitStatus(e.id, claim.Completed, settle)
	require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")))

	// Prune until the claim is a second past terminal and goes: by this
	// prune, or by the worker's own retention run (it runs once at start,
	// when the worker becomes River's leader), whichever comes first. The
	// two share the work (claim.Store.Prune), so either may delete it.
	deadline := time.Now().Add(settle)
	for {
		out, code := s.run("claims", "prune", "--json")
		require.Zero(t, code, out)
		var res claim.PruneResult
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		require.LessOrEqual(t, res.Deleted, 1, out)
		_, _, err := s.store.Get(t.Context(), provider, e.id)
		if errors.Is(err, claim.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "the claim was never pruned")
		time.Sleep(100 * time.Millisecond)
	}
	var deliveries int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, e.id).Scan(&deliveries))
	require.Zero(t, deliveries, "deliveries went with the claim")

	// The provider redelivers (a manual resend, say).
	require.Equal(t, ack{status: http.StatusOK}, s.send(ingest, e, providerSecret), "claimed anew, not a duplicate")
	c, _ := s.waitStatus(e.id, claim.Completed, settle)
	require.Equal(t, 1, c.AttemptCount, "a new claim counts afresh")

	calls := s.down.callsFor(key(e.id, "ship"))
	require.Len(t, calls, 2, "delivered again")
	require.Equal(t, calls[0].key, calls[1].key, "with the same Idempotency-Key")
	require.Equal(t, string(e.body()), string(calls[1].body))
	require.Equal(t, 1, s.down.effectsOf(key(e.id, "ship")), "so the downstream's dedupe makes it one effect")

	// A copy now is a duplicate of the new claim, as before retention.
	require.Equal(t, ack{status: http.StatusOK, duplicate: true}, s.send(ingest, e, providerSecret))
}

// exportRun is one `worker claims export` run, read as it streams.
type exportRun struct {
	lines    int
	maxRSSKB int64
}

// export runs the worker binary's claims export with args, hands each line
// to check as it arrives, and returns the line count and the process's peak
// resident memory. The peak is the kernel's high-water mark of the
// process's own image (VmHWM), read while it streams: the rusage of a
// child would also count the test process it was forked from.
func (s *stack) export(check func(line []byte), args ...string) exportRun {
	s.t.Helper()
	cmd := exec.Command(bins.worker, append([]string{"claims", "export"}, args...)...)
	cmd.Env = s.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(s.t, err)
	require.NoError(s.t, cmd.Start())
	var run exportRun
	hwm := func() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					run.maxRSSKB = max(run.maxRSSKB, kb)
				}
			}
		}
	}
	r := bufio.NewReaderSize(stdout, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			run.lines++
			check(line)
			if run.lines%500 == 0 {
				hwm()
			}
		}
		if err == io.EOF {
			break
		}
		require.NoError(s.t, err)
	}
	hwm()
	require.NoError(s.t, cmd.Wait(), stderr.String())
	require.NotZero(s.t, run.maxRSSKB, "no memory reading")
	return run
}

// exported is a line of claims export, as an archive reader decodes it.
type exported struct {
	claim.Record
	Deliveries []struct {
		Route          string       `json:"route"`
		Status         claim.Status `json:"status"`
		AttemptCount   int          `json:"attempt_count"`
		LastError      string       `json:"last_error"`
		IdempotencyKey string       `json:"idempotency_key"`
		CompletedAt    *time.Time   `json:"completed_at"`
	} `json:"deliveries"`
	Payload []byte `json:"payload"`
}

// TestExportAtScale exports 100,000 claims from the worker binary: its
// memory stays about what it is for 10,000 (the export streams), and its
// output round-trips, every claim with every delivery and payload.
func TestExportAtScale(t *testing.T) {
	t.Parallel()
	const n = 100_000
	s := newStack(t, []route{{name: "ship", events: []string{"*"}}, {name: "mail", events: []string{"*"}}})
	ctx := t.Context()
	// Claim i: completed, failed or ignored by i % 3; first seen i ms
	// after a base, so oldest first is i ascending; a ship delivery unless
	// ignored, and a mail one too when i is even.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seed := make([]*testfactory.ClaimOpts, n)
	for i := range seed {
		id := i + 1
		c := &testfactory.ClaimOpts{Provider: "sw", EventID: fmt.Sprintf("evt_%d", id), EventType: "order.paid",
			Status:      []claim.Status{claim.Completed, claim.Failed, claim.Ignored}[id%3],
			Payload:     fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, id, strings.Repeat("x", 200)),
			FirstSeenAt: testfactory.At(base.Add(time.Duration(id) * time.Millisecond)),
			UpdatedAt:   testfactory.At(base.Add(time.Duration(id) * time.Millisecond)),
		}
		if c.Status == claim.Failed {
			c.LastError = "HTTP 422 Unprocessable Entity"
		}
		if c.Status != claim.Ignored {
			routes := []string{"ship"}
			if id%2 == 0 {
				routes = append(routes, "mail")
			}
			c.Deliveries = map[string]*testfactory.DeliveryOpts{}
			for _, r := range routes {
				c.Deliveries[r] = &testfactory.DeliveryOpts{Status: claim.DeliveryStatus(c.Status), LastError: c.LastError}
			}
		}
		seed[i] = c
	}
	testfactory.Claims(ctx, t, s.db.Pool, seed)
	var wantDeliveries int
	require.NoError(t, s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&wantDeliveries))

	small := s.export(func([]byte) {}, "--payloads", "--before", "2026-01-01T00:00:10Z")
	require.Equal(t, 9999, small.lines, "claims 1..9999 are first seen within the first 10s")

	next, deliveries := 1, 0
	big := s.export(func(line []byte) {
		var e exported
		require.NoError(t, json.Unmarshal(line, &e))
		i := next
		next++
		require.Equal(t, fmt.Sprintf("evt_%d", i), e.EventID, "oldest first")
		require.Equal(t, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 200)), string(e.Payload))
		require.Equal(t, []claim.Status{claim.Completed, claim.Failed, claim.Ignored}[i%3], e.Status)
		require.Equal(t, "order.paid", e.EventType)
		require.True(t, e.FirstSeenAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond)))
		require.Equal(t, e.Status == claim.Completed, e.CompletedAt != nil)
		routes := []string{}
		for _, d := range e.Deliveries {
			routes = append(routes, d.Route)
			require.Equal(t, e.Status, d.Status)
			require.Equal(t, e.LastError, d.LastError)
			require.Equal(t, key(e.EventID, d.Route), d.IdempotencyKey)
		}
		switch {
		case e.Status == claim.Ignored:
			require.Empty(t, routes)
		case i%2 == 0:
			require.Equal(t, []string{"mail", "ship"}, routes)
		default:
			require.Equal(t, []string{"ship"}, routes)
		}
		deliveries += len(e.Deliveries)
	}, "--payloads")
	require.Equal(t, n, big.lines, "every claim")
	require.Equal(t, wantDeliveries, deliveries, "every delivery")

	t.Logf("claims export --payloads: peak RSS %d KiB for %d claims, %d KiB for %d", small.maxRSSKB, small.lines, big.maxRSSKB, big.lines)
	// The 100k export writes about 45 MB; holding it would show.
	require.Less(t, big.maxRSSKB, int64(48<<10), "peak RSS under 48 MiB")
	require.Less(t, big.maxRSSKB, small.maxRSSKB+8<<10, "ten times the claims, about the same memory")
}
