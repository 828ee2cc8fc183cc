package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestGroupCommitNoAckBeforeCommit kills Postgres (a cluster of the test's
// own) while a shared claim transaction of five requests is committing:
// its statement ran, and a deferred trigger holds the commit. None of the
// five hears 2xx; all hear 503, and none of their claims exists once
// Postgres is back. The requests of the batches before, which committed,
// got their 200.
func TestGroupCommitNoAckBeforeCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := dbtest.NewCluster(t)
	url := cluster.URL("postgres")
	require.NoError(t, run(context.Background(), []string{"ingest", "migrate"}, func(k string) string {
		return map[string]string{"DATABASE_URL": url}[k]
	}, &bytes.Buffer{}, &bytes.Buffer{}))
	// A claim_timeout long enough for the test to line the batches up on a
	// loaded machine.
	s := startWith(t, url, strings.Replace(testConfig, "claim_timeout: 2s", "claim_timeout: 30s", 1), nil)
	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_warm", "invoice.paid"), stripeSecret, time.Now())).body)

	// Commits of evt_slow_* claims wait in a deferred trigger, after the
	// claim statement and before the commit completes.
	_, err := s.pool.Exec(ctx, `
CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_id LIKE 'evt_slow_%' THEN PERFORM pg_sleep(60); END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON webhook_event_claims
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit();`)
	require.NoError(t, err)

	// Hold every claim transaction ingest runs at once on keys the test
	// inserted without committing, so the five requests queue behind them
	// and then share the next batch.
	const held = ingest.DefaultGroupConcurrency
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	for i := range held {
		testfactory.Claim(ctx, t, tx, &testfactory.ClaimOpts{EventID: fmt.Sprintf("evt_hold_%d", i)})
	}

	replies := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	send := func(id string) {
		wg.Go(func() {
			r := s.post(t, signStripe(stripeEvent(id, "invoice.paid"), stripeSecret, time.Now()))
			mu.Lock()
			defer mu.Unlock()
			replies[id] = r.status
		})
	}
	for i := range held {
		// One at a time, so that each is a batch of its own.
		send(fmt.Sprintf("evt_hold_%d", i))
		require.Eventually(t, func() bool {
			return s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == i+1
		}, 20*time.Second, 5*time.Millisecond, "batch %d waits on the test's insert", i)
	}
	for i := range 5 {
		send(fmt.Sprintf("evt_slow_%d", i))
	}
	require.Eventually(t, func() bool { return s.metric(t, "hookgate_ingest_claims_waiting") == "5" },
		20*time.Second, 5*time.Millisecond, "the five wait for the next batch")
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range held {
			if _, ok := replies[fmt.Sprintf("evt_hold_%d", i)]; !ok {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond, "the held batches answered")
	require.Eventually(t, func() bool {
		return s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'`) == 1
	}, 20*time.Second, 5*time.Millisecond, "the five's batch is committing")
	require.NoError(t, cluster.Kill(ctx))
	wg.Wait()

	for i := range held {
		require.Equal(t, http.StatusOK, replies[fmt.Sprintf("evt_hold_%d", i)], "the batches before committed")
	}
	for i := range 5 {
		require.Equal(t, http.StatusServiceUnavailable, replies[fmt.Sprintf("evt_slow_%d", i)], "no 2xx without the commit")
	}

	require.NoError(t, cluster.Restart(ctx))
	s.waitReady(t)
	// (evt_hold_*'s claims are not looked for: the throwaway cluster runs with
	// synchronous_commit off, so an immediate kill may lose a commit.)
	for i := range 5 {
		_, ok := s.claimRow(t, "stripe", fmt.Sprintf("evt_slow_%d", i))
		require.False(t, ok, "the batch that was refused 503 did not commit")
	}
	_, err = s.pool.Exec(ctx, `DROP TRIGGER hold_commit ON webhook_event_claims`)
	require.NoError(t, err)
	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_slow_0", "invoice.paid"), stripeSecret, time.Now())).body,
		"the provider's retry is a new event, not a duplicate")
}

// metric returns the value of an unlabelled series on /metrics.
func (s *server) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := client.Get(s.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
