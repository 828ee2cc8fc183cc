package e2e_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// pan is a card number as a provider's body might carry one.
const pan = "4242424242424242"

// A body carrying card data, run through a filter and a body program that
// fail on it, leaves no trace of the digits in any log line of ingest or the
// worker (at debug level), nor in last_error or the metrics.
func TestCardNumberNeverReachesALog(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "filtered", events: []string{"*"}, extra: "    filter: '.data.object.card.number == 1'\n"},
		{name: "shaped", events: []string{"*"}, maxAttempts: 2, extra: "    body: '{n: (.data.object.card | tonumber)}'\n"},
		{name: "failing", events: []string{"*"}, maxAttempts: 2, extra: "    body: 'error(\"declined: \" + .data.object.card)'\n"},
	})
	s.env = append(s.env, "HOOKGATE_LOG_LEVEL=debug")
	ingest, worker := s.ingest(), s.worker()
	raw := `{"type":"charge.succeeded","data":{"object":{"card":"card=` + pan + ` cvc 123 exp 12/30"}}}`
	e := event{id: "evt_pan", typ: "charge.succeeded", raw: []byte(raw)}
	s.claimed(ingest, e)
	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Len(t, ds, 2, "the filter failed, so that route took no delivery")
	require.Equal(t, "route program failed: routes[1].body: tonumber cannot be applied to its input", deliveryOf(t, ds, "shaped").LastError)
	require.Equal(t, "route program failed: routes[2].body: error raised with a string (not quoted: it may hold body text)",
		deliveryOf(t, ds, "failing").LastError)
	metrics := scrape(t, ingest) + scrape(t, worker)
	ingest.stop()
	worker.stop()

	logs := ingest.out.String() + worker.out.String()
	require.Contains(t, logs, "routes[0].filter: expected an object but got: string", "the filter's failure is logged, by kind")
	lines := strings.Split(logs, "\n")
	require.Greater(t, len(lines), 10)
	for _, digits := range []string{pan, pan[:6], pan[6:12], pan[12:] + " cvc", "cvc 123"} {
		for _, line := range lines {
			require.NotContains(t, line, digits)
		}
		require.NotContains(t, metrics, digits)
		for _, d := range ds {
			require.NotContains(t, d.LastError, digits)
		}
	}
}

// vmHWM is the peak resident set size of process pid, from /proc.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// rssCeiling is what either binary may reach while its programs are driven
// past their bounds: well above their resting size (about 30 MiB), far below
// what the unbounded programs took (1 to 2 GiB).
const rssCeiling = 160 << 20

// The two programs of the report, a constant string repetition as a filter
// under 8 concurrent requests and a body repeating a string by a count the
// provider sent, fail at once with an error naming the program, the
// string never built, and neither process grows past rssCeiling.
func TestJQBoundsHoldInTheProcesses(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "repeat-filter", events: []string{"filter.*"}, extra: "    filter: '(\"x\" * 300000000 | length) > 0'\n"},
		{name: "repeat-body", events: []string{"body.*"}, maxAttempts: 2, extra: "    body: '.data.s * .data.k'\n"},
	})
	ingest, worker := s.ingest(), s.worker()

	var wg sync.WaitGroup
	acks := make([]ack, 8)
	for i := range acks {
		wg.Go(func() {
			acks[i] = s.send(ingest, event{id: fmt.Sprintf("evt_f%d", i), typ: "filter.test"}, providerSecret)
		})
	}
	wg.Wait()
	for _, a := range acks {
		require.Equal(t, ack{status: http.StatusOK}, a)
	}
	e := event{id: "evt_body", typ: "body.test", raw: []byte(`{"type":"body.test","data":{"s":"xyzxyzxyz","k":1e8}}`)}
	s.claimed(ingest, e)
	_, ds := s.waitStatus(e.id, claim.Failed, settle)
	require.Equal(t, "route program failed: routes[1].body: repeats a string beyond the bound of 16.0 MiB (16 MiB plus 4 bytes per input byte)",
		deliveryOf(t, ds, "repeat-body").LastError)

	ingestRSS, workerRSS := vmHWM(t, ingest.cmd.Process.Pid), vmHWM(t, worker.cmd.Process.Pid)
	t.Logf("peak RSS: ingest %d MiB, worker %d MiB", ingestRSS>>20, workerRSS>>20)
	require.Less(t, ingestRSS, int64(rssCeiling))
	require.Less(t, workerRSS, int64(rssCeiling))
	ingest.stop()
	require.Equal(t, 8, strings.Count(ingest.out.String(),
		"routes[0].filter: repeats a string beyond the bound of 16.0 MiB"), ingest.out.String())
	require.NotContains(t, ingest.out.String(), "took longer than", "the bound stops it before the time cut")
}
