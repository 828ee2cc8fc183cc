package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/devlocal"
	"github.com/hookgate/hookgate/internal/proctest"
)

// asMain makes the test binary serve one design, as devtool's hidden
// DesignCommand does, instead of running the tests: the lab starts it as
// its designs' processes.
const asMain = "LAB_TEST_AS_DESIGN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(serveDesignMain(os.Args[1:]))
	}
	// dbtest.Main checks for leaked goroutines once the tests pass.
	dbtest.Main(m)
}

// serveDesignMain runs args (DesignCommand and its flags) as devtool's
// main would, until SIGTERM.
func serveDesignMain(args []string) int {
	if len(args) == 0 || args[0] != DesignCommand {
		fmt.Fprintf(os.Stderr, "want %s and its flags, got %q\n", DesignCommand, args)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ServeDesign(ctx, args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", DesignCommand, err)
		return 1
	}
	return 0
}

// TestLab runs the whole matrix against the test Postgres, with the designs
// as child processes (this test binary, as devtool) and the built ingest and
// worker, and asserts from the measurements what the lab exists to show.
func TestLab(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
		"github.com/hookgate/hookgate/cmd/ingest", "github.com/hookgate/hookgate/cmd/worker").CombinedOutput()
	require.NoError(t, err, "building ingest and worker: %s", out)
	db := dbtest.NewDB(t)

	var progress, logs proctest.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("progress:\n%s\nprocesses:\n%s", progress.String(), logs.String())
		}
	})
	results, err := runLab(t.Context(), labOptions{
		dbURL: db.URL, self: os.Args[0], selfEnv: append(os.Environ(), asMain+"=1"),
		ingestBin: filepath.Join(binDir, "ingest"), workerBin: filepath.Join(binDir, "worker"), workDir: t.TempDir(),
		designs: designNames(), scenarios: scenarioNames(), copies: 5,
		logs: devlocal.NewConsole(&logs), con: devlocal.NewConsole(&progress),
	})
	require.NoError(t, err)
	require.Len(t, results, len(labDesigns)*len(labScenarios))
	require.Empty(t, labFailures(results))
	cell := func(design, scenario string) labResult {
		r, ok := findResult(results, design, scenario)
		require.True(t, ok, "%s × %s ran", design, scenario)
		return r
	}

	lookup := cell(designLookup, scenarioCopies)
	require.Positive(t, lookup.duplicates, "a lookup duplicates under concurrent copies: %+v", lookup)
	seen := cell(designSeen, scenarioCrashBefore)
	require.Equal(t, 1, seen.lost, "a seen flag loses the event killed before its effect: %+v", seen)
	require.Zero(t, seen.tally.effects)
	lease := cell(designLease, scenarioCrashAfter)
	require.Positive(t, lease.duplicates, "recovery without a key repeats the effect: %+v", lease)
	require.Equal(t, 1, lease.recovered)
	for _, d := range []string{designLeaseKey, designHookgate} {
		for _, s := range scenarioNames() {
			r := cell(d, s)
			require.Zero(t, r.duplicates, "%s × %s: %+v", d, s, r)
			require.Zero(t, r.lost, "%s × %s: %+v", d, s, r)
			require.Equal(t, 1, r.tally.effects, "%s × %s: %+v", d, s, r)
			require.True(t, r.completed, "%s × %s: %+v", d, s, r)
			if s != scenarioCopies {
				require.Equal(t, 1, r.recovered, "%s × %s: %+v", d, s, r)
			}
		}
	}
	// The crash-after cells of designs 4 and 5 did call twice: the
	// downstream's key, not luck, kept the effect single.
	for _, d := range []string{designLeaseKey, designHookgate} {
		r := cell(d, scenarioCrashAfter)
		require.Equal(t, 1, r.tally.deduped, "%s: %+v", d, r)
	}
	require.Contains(t, progress.String(), "20/20 cells done")

	table := labTable(results, designNames(), scenarioNames())
	t.Logf("measured:\n%s", table)
	require.Contains(t, table, "crash after the effect")
	require.Contains(t, table, "dup 0  lost 1  rec 0", "design 2's crash-before row")
	require.Contains(t, table, "hookgate over design 4: the ack tied to a durable job")

	path := filepath.Join(t.TempDir(), "report.html")
	require.NoError(t, writeLabReport(path, results, designNames(), scenarioNames(), 5, 0))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	html := string(b)
	require.Equal(t, len(labScenarios), strings.Count(html, "<svg "), "a chart per scenario")
	require.Contains(t, html, "a seen flag loses the event")
	require.Contains(t, html, "What hookgate adds over design 4")
	for _, external := range []string{"src=", "<link", "@import", "url("} {
		require.NotContains(t, html, external, "no external assets")
	}
}

func TestLabFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--copies", "1"}, "--copies must be between 2 and 50"},
		{[]string{"--copies", "51"}, "--copies must be between 2 and 50"},
		{[]string{"--scenario", "crash-during"}, `--scenario: no "crash-during"; choose from copies, lost-ack, crash-before, crash-after`},
		{[]string{"--design", "lookup,outbox"}, `--design: no "outbox"`},
		{[]string{"extra"}, "lab takes no arguments"},
		{[]string{"--bin", "/nonexistent"}, "ingest is not built"},
	} {
		var out strings.Builder
		err := Run(t.Context(), tt.args, func(string) string { return "" }, &out, &out)
		require.ErrorContains(t, err, tt.wantErr, tt.args)
	}

	picked, err := pickNames("--scenario", "crash-after, copies,crash-after", scenarioNames())
	require.NoError(t, err)
	require.Equal(t, []string{scenarioCopies, scenarioCrashAfter}, picked, "the table's order, once each")
	all, err := pickNames("--design", "all", designNames())
	require.NoError(t, err)
	require.Equal(t, []string{designLookup, designSeen, designLease, designLeaseKey, designHookgate}, all)
}

// A cell's sentence tells its usual story only when the run measured the
// usual outcome; otherwise it says what was measured.
func TestLabWhy(t *testing.T) {
	t.Parallel()
	usual := labResult{design: designLookup, scenario: scenarioCopies, copies: 5, tally: labTally{calls: 5, effects: 5}}
	usual.measure()
	require.Equal(t, "5 copies each looked the event up before the first had inserted it, so 5 effects ran; the insert after the effect comes too late to stop them.", labWhy(usual))

	unusual := labResult{design: designLookup, scenario: scenarioCopies, copies: 5, tally: labTally{calls: 5, effects: 1}, acked: true, completed: true}
	unusual.measure()
	require.Equal(t, "Unusually for this design, this run measured 1 effect(s) for 5 call(s) (0 answered by key without an effect), acked true, its record done true.", labWhy(unusual))

	lost := labResult{design: designSeen, scenario: scenarioCrashBefore, tally: labTally{calls: 1}, acked: true, claimed: true, interrupted: true}
	lost.measure()
	require.Equal(t, [3]int{0, 1, 0}, [3]int{lost.duplicates, lost.lost, lost.recovered})
	require.Contains(t, labWhy(lost), "a seen flag loses the event")

	require.Equal(t, "Not measured: hookgate had not finished.", labWhy(labResult{failure: "hookgate had not finished"}))
	for _, d := range labDesigns {
		for _, s := range labScenarios {
			_, ok := labUsual[[2]string{d.name, s.name}]
			require.True(t, ok, "%s × %s has its explanation", d.name, s.name)
		}
	}
}

// The lab downstream counts an effect per call without a key, one per key
// with one, and holds a trapped call before or after its effect.
func TestLabDownstream(t *testing.T) {
	t.Parallel()
	down := newLabDownstream()
	srv := httptest.NewServer(down)
	t.Cleanup(srv.Close)
	post := func(id, key string) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/effect/x", strings.NewReader(`{"id":"`+id+`"}`))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 {
		require.Equal(t, http.StatusOK, post("evt_plain", ""))
		require.Equal(t, http.StatusOK, post("evt_keyed", "k"))
	}
	require.Equal(t, labTally{calls: 2, effects: 2}, down.tally("evt_plain"))
	require.Equal(t, labTally{calls: 2, effects: 1, deduped: 1}, down.tally("evt_keyed"))

	for _, mode := range []trapMode{trapBefore, trapAfter} {
		id := fmt.Sprintf("evt_trap_%d", mode)
		tr := down.arm(id, mode)
		answered := make(chan int, 1)
		go func() { answered <- post(id, "") }()
		<-tr.arrived
		want := labTally{calls: 1}
		if mode == trapAfter {
			want.effects = 1 // performed before the hold
		}
		require.Equal(t, want, down.tally(id))
		close(tr.release)
		code := <-answered
		require.Equal(t, mode == trapAfter, code == http.StatusOK, "a call dropped before its effect is not answered 2xx")
		require.Equal(t, http.StatusOK, post(id, ""), "only the first call is held")
		want.calls, want.effects = 2, want.effects+1
		require.Equal(t, want, down.tally(id))
	}
	require.Equal(t, http.StatusBadRequest, post("", ""), "an event id is needed")
}

// A lab cancelled while it starts its processes returns and leaves none of
// them running.
func TestLabCancelledCleansUp(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var progress proctest.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := runLab(ctx, labOptions{
			dbURL: db.URL, self: os.Args[0], selfEnv: append(os.Environ(), asMain+"=1"),
			workDir: t.TempDir(), designs: []string{designLease}, scenarios: []string{scenarioCrashBefore}, copies: 2,
			logs: devlocal.NewConsole(io.Discard), con: devlocal.NewConsole(&progress),
		})
		done <- err
	}()
	require.Eventually(t, func() bool { return len(labChildren(t, db.URL)) > 0 }, time.Minute, 10*time.Millisecond, "the design started")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("the lab did not return after its context ended")
	}
	require.Empty(t, labChildren(t, db.URL), "every process the lab started has exited")
}

// labChildren lists this process's live children running the lab's
// lab-design command on the database dbURL (other tests run labs too).
func labChildren(t *testing.T, dbURL string) []string {
	t.Helper()
	var found []string
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	require.NoError(t, err)
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, pid := range strings.Fields(string(b)) {
			cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
			environ, eerr := os.ReadFile("/proc/" + pid + "/environ")
			if err == nil && eerr == nil && strings.Contains(string(cmdline), "lab-design") &&
				strings.Contains(string(environ), "DATABASE_URL="+dbURL+"\x00") {
				found = append(found, pid)
			}
		}
	}
	return found
}

// A scenario's chart draws each design's duplicates and lost events, the
// largest count the full height.
func TestLabChart(t *testing.T) {
	t.Parallel()
	results := []labResult{
		{design: designLookup, scenario: scenarioCrashAfter, duplicates: 2},
		{design: designSeen, scenario: scenarioCrashAfter, lost: 1},
		{design: designHookgate, scenario: scenarioCrashAfter},
	}
	c := newLabChart(results, []string{designLookup, designSeen, designHookgate}, scenarioCrashAfter)
	require.Equal(t, "crash after the effect", c.Title)
	require.Equal(t, 2, c.Max)
	require.Len(t, c.Bars, 6, "two bars per design")
	heights := []int{}
	for _, b := range c.Bars {
		heights = append(heights, b.H)
		require.Equal(t, c.AxisY, b.Y+b.H, "bars stand on the axis")
	}
	require.Equal(t, []int{chartPlot, 0, 0, chartPlot / 2, 0, 0}, heights)
	require.Equal(t, "1. lookup", c.Labels[0].Text)
	require.Equal(t, "5. hookgate", c.Labels[2].Text)
}
