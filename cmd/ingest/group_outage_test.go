package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGroupCommitNoAckBeforeCommit kills Postgres (a cluster of the test's
// own) while a shared claim transaction of five requests is committing:
// its statement ran, and a deferred trigger holds the commit. None of the
// five hears 2xx; all hear 503, and none of their claims exists once
// Postgres is back. The request of the batch before, which committed, got
// its 200.
func TestGroupCommitNoAckBeforeCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, s := startOnOwnCluster(t)
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

	// Hold one batch on a key the test inserted without committing, so the
	// five requests queue behind it and then share the next batch.
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload)
VALUES ('stripe', 'evt_hold', 'invoice.paid', 'processing', '{}')`)
	require.NoError(t, err)

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
	send("evt_hold")
	require.Eventually(t, func() bool {
		return s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == 1
	}, 10*time.Second, 5*time.Millisecond, "the first batch waits on the test's insert")
	for i := range 5 {
		send(fmt.Sprintf("evt_slow_%d", i))
	}
	require.Eventually(t, func() bool { return s.metric(t, "hookgate_ingest_claims_waiting") == "5" },
		10*time.Second, 5*time.Millisecond, "the five wait for the next batch")
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool {
		return s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'`) == 1
	}, 10*time.Second, 5*time.Millisecond, "the five's batch is committing")
	require.NoError(t, cluster.Kill(ctx))
	wg.Wait()

	require.Equal(t, http.StatusOK, replies["evt_hold"], "the batch before committed")
	for i := range 5 {
		require.Equal(t, http.StatusServiceUnavailable, replies[fmt.Sprintf("evt_slow_%d", i)], "no 2xx without the commit")
	}

	require.NoError(t, cluster.Restart(ctx))
	s.waitReady(t)
	// (evt_hold's claim is not looked for: the throwaway cluster runs with
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
