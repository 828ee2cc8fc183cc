package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

	require.NoError(t, cluster.SetReadOnly(context.Background(), true))
	require.Eventually(t, func() bool { return s.get(t, "/readyz") == http.StatusServiceUnavailable },
		30*time.Second, 20*time.Millisecond, "a read-only server is not ready")
	during := signStripe(stripeEvent("evt_read_only", "invoice.paid"), stripeSecret, time.Now())
	require.Equal(t, http.StatusServiceUnavailable, s.post(t, during).status)

	require.NoError(t, cluster.SetReadOnly(context.Background(), false))
	s.waitReady(t)
	require.Equal(t, accepted, s.post(t, during).body, "the event refused while read-only was never recorded")
}
