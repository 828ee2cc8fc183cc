package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
)

// TestDatabaseOutage stops Postgres (a throwaway cluster of the test's own)
// under a running ingest: a new event gets 503 and nothing is acknowledged,
// /readyz says 503, and once Postgres is back the same event is accepted
// without restarting ingest.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, s := startOnOwnCluster(t)

	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_before", "invoice.paid"), stripeSecret, time.Now())).body)

	require.NoError(t, cluster.Stop(ctx))
	during := signStripe(stripeEvent("evt_during", "invoice.paid"), stripeSecret, time.Now())
	r := s.post(t, during)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "event could not be recorded; retry later", r.body["error"], "no SQL or driver detail reaches the provider")
	require.Equal(t, http.StatusServiceUnavailable, s.get(t, "/readyz"))
	require.Equal(t, http.StatusOK, s.get(t, "/healthz"), "the process itself is fine")
	require.Contains(t, s.metrics(t), `hookgate_ingest_unavailable_total{provider="stripe"} 1`)

	require.NoError(t, cluster.Restart(ctx))
	s.waitReady(t)
	r = s.post(t, during)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, accepted, r.body, "the event refused during the outage was never recorded")
	c, ok := s.claimRow(t, "stripe", "evt_during")
	require.True(t, ok)
	require.Equal(t, "processing", c.Status)
}

// TestDatabaseHangs freezes Postgres (SIGSTOP) under a running ingest: the
// provider still hears 503, bounded by ingest.claim_timeout, rather than
// waiting on its own timeout; after SIGCONT the event is accepted.
func TestDatabaseHangs(t *testing.T) {
	t.Parallel()
	cluster, s := startOnOwnCluster(t)
	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_warm", "invoice.paid"), stripeSecret, time.Now())).body)

	pids := clusterPIDs(t, cluster)
	signalAll(t, pids, syscall.SIGSTOP)
	frozen := true
	t.Cleanup(func() {
		if frozen {
			signalAll(t, pids, syscall.SIGCONT)
		}
	})

	hung := signStripe(stripeEvent("evt_hung", "invoice.paid"), stripeSecret, time.Now())
	// The client's own timeout (15 s) is far above claim_timeout (2 s): a
	// reply at all, and a 503, shows the bound is ingest's.
	r := s.post(t, hung)
	require.Equal(t, http.StatusServiceUnavailable, r.status)

	signalAll(t, pids, syscall.SIGCONT)
	frozen = false
	s.waitReady(t)
	require.Equal(t, accepted, s.post(t, hung).body)
}

// startOnOwnCluster runs ingest against a throwaway cluster of the test's
// own, migrated with `ingest migrate`, which the test may stop or freeze.
func startOnOwnCluster(t *testing.T) (*pgcluster.Cluster, *server) {
	t.Helper()
	cluster := dbtest.NewCluster(t)
	url := cluster.URL("postgres")
	require.NoError(t, run(context.Background(), []string{"ingest", "migrate"}, func(k string) string {
		return map[string]string{"DATABASE_URL": url}[k]
	}, &bytes.Buffer{}, &bytes.Buffer{}))
	return cluster, start(t, url, nil)
}

func (s *server) get(t *testing.T, path string) int {
	t.Helper()
	resp, err := client.Get(s.base + path)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func (s *server) waitReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := client.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
}

// clusterPIDs returns the postmaster's pid and its children's.
func clusterPIDs(t *testing.T, c *pgcluster.Cluster) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	require.NoError(t, err)
	master, err := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	require.NoError(t, err)
	pids := []int{master}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Fields after the parenthesized command: state, ppid, ...
		rest := string(b[bytes.LastIndexByte(b, ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(master) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	require.Greater(t, len(pids), 1, "postmaster has children")
	return pids
}

func signalAll(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}
