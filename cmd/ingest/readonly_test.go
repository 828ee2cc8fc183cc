package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/pgcluster"
)

// TestReadOnlyDatabase turns the server under a running ingest read-only,
// as a demotion leaves the connections that outlive it: /readyz says 503
// (the server answers, but would refuse every claim) and a new event is
// refused with 503, not acknowledged. Writable again, the same event is
// accepted without restarting ingest.
func TestReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	cluster, s := startOnOwnCluster(t)
	require.Equal(t, accepted, s.post(t, signStripe(stripeEvent("evt_writable", "invoice.paid"), stripeSecret, time.Now())).body)
	require.Equal(t, http.StatusOK, s.get(t, "/readyz"))

	setReadOnly(t, cluster, true)
	require.Eventually(t, func() bool { return s.get(t, "/readyz") == http.StatusServiceUnavailable },
		30*time.Second, 20*time.Millisecond, "a read-only server is not ready")
	during := signStripe(stripeEvent("evt_read_only", "invoice.paid"), stripeSecret, time.Now())
	require.Equal(t, http.StatusServiceUnavailable, s.post(t, during).status)

	setReadOnly(t, cluster, false)
	s.waitReady(t)
	require.Equal(t, accepted, s.post(t, during).body, "the event refused while read-only was never recorded")
}

// setReadOnly makes every new transaction on c read-only, or writable again.
func setReadOnly(t *testing.T, c *pgcluster.Cluster, on bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET default_transaction_read_only = %t", on))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
}
