package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
)

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
		logs: &console{w: &logs}, con: &console{w: &progress},
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
