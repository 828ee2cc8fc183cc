package maintenance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/maintenance"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// lockedBuffer is a log sink the River client's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// The worker's River client runs the retention job at start: old terminal
// claims go, young and processing ones stay, the counters count it, and
// the run is logged in one line.
func TestRetainerRunsAsPeriodicJob(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	ctx := t.Context()
	ignored := func(id string, terminal *testfactory.When) {
		testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{EventID: id, Status: claim.Ignored, TerminalAt: terminal})
	}
	for i := range 25 {
		ignored(fmt.Sprintf("evt_old_%d", i+1), testfactory.Ago(3*time.Hour))
	}
	for i := range 4 {
		ignored(fmt.Sprintf("evt_mid_%d", i+1), testfactory.Ago(90*time.Minute))
	}
	ignored("evt_young", testfactory.Now())
	testfactory.Claim(ctx, t, db.Pool, &testfactory.ClaimOpts{EventID: "evt_stuck", FirstSeenAt: testfactory.Ago(365 * 24 * time.Hour)})

	reg := prometheus.NewRegistry()
	metrics := maintenance.NewRetentionMetrics(reg)
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	r := config.Retention{Claims: config.Duration(2 * time.Hour), Payloads: config.Duration(time.Hour),
		Interval: config.Duration(time.Hour), BatchSize: 10}
	retainer := maintenance.NewRetainer(claim.NewStore(db.Pool, nil, nil), r, time.Minute, metrics, logger)
	workers := river.NewWorkers()
	river.AddWorker(workers, retainer)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		TestOnly:     true,
		Logger:       slog.New(slog.DiscardHandler),
		Workers:      workers,
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		PeriodicJobs: []*river.PeriodicJob{retainer.PeriodicJob()},
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	// Not t.Context(): it is cancelled before cleanups run, and Stop would
	// return without waiting for the client's goroutines.
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	require.Eventually(t, func() bool { return len(logs.lines("applied retention")) == 1 }, 30*time.Second, 20*time.Millisecond)
	line := logs.lines("applied retention")[0]
	require.EqualValues(t, 25, line["deleted"])
	require.EqualValues(t, 4, line["payloads_cleared"])
	require.Equal(t, map[string]float64{
		"hookgate_retention_deleted_total":          25,
		"hookgate_retention_payloads_cleared_total": 4,
	}, counters(t, reg))

	var left []string
	rows, err := db.Pool.Query(ctx, `SELECT event_id || ':' || (payload IS NOT NULL)::text FROM webhook_event_claims ORDER BY event_id`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"evt_mid_1:false", "evt_mid_2:false", "evt_mid_3:false", "evt_mid_4:false",
		"evt_stuck:true", "evt_young:true"}, left)
}

// counters returns the value of every counter reg gathers, by name.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	return out
}

func TestRiverJobRetention(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tt := range []struct {
		name      string
		claims    time.Duration
		reconcile time.Duration
		want      maintenance.JobRetention
	}{
		{"Defaults", 90 * day, time.Minute, maintenance.JobRetention{Completed: day, Cancelled: day, Discarded: 7 * day}},
		{"ShortClaims", 2 * time.Hour, time.Minute, maintenance.JobRetention{Completed: 2 * time.Hour, Cancelled: 2 * time.Hour, Discarded: 2 * time.Hour}},
		{"ReconcilerNeedsItsEvidence", 30 * time.Second, time.Minute,
			maintenance.JobRetention{Completed: 30 * time.Second, Cancelled: 2 * time.Minute, Discarded: 2 * time.Minute}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := maintenance.RiverJobRetention(config.Retention{Claims: config.Duration(tt.claims)}, tt.reconcile)
			require.Equal(t, tt.want, got)
		})
	}
}

type fakePruner struct{ res claim.PruneResult }

func (f fakePruner) Prune(context.Context, claim.Retention) (claim.PruneResult, error) {
	return f.res, nil
}

// A retainer given the audit's pruning runs it with each run, and logs
// what it deleted in the run's line.
func TestRetainerPrunesTheAudit(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	calls := 0
	r := maintenance.NewRetainer(fakePruner{claim.PruneResult{Deleted: 2}}, config.Retention{Interval: config.Duration(time.Hour)},
		time.Minute, nil, slog.New(slog.NewJSONHandler(&logs, nil))).
		WithAudit(func(context.Context) (int, error) { calls++; return 3, nil })
	require.NoError(t, r.Work(t.Context(), &river.Job[maintenance.RetentionArgs]{}))
	require.Equal(t, 1, calls)
	lines := logs.lines("applied retention")
	require.Len(t, lines, 1)
	require.EqualValues(t, 3, lines[0]["audit_deleted"])
	require.EqualValues(t, 2, lines[0]["deleted"])
}
