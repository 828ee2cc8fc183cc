package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
	"github.com/hookgate/hookgate/internal/proctest"
)

// TestReadyzNeedsWritableDatabase turns the database under a running
// worker read-only, as a demotion leaves the connections that outlive it:
// /readyz answers 503, though the server still answers, and 200 again once
// it accepts writes, without a restart.
func TestReadyzNeedsWritableDatabase(t *testing.T) {
	t.Parallel()
	cluster := dbtest.NewCluster(t)
	env := map[string]string{
		"DATABASE_URL":    cluster.URL("postgres"),
		"HOOKGATE_CONFIG": writeConfig(t, "http://127.0.0.1:1"),
		"T_STRIPE":        "whsec_stripe",
		"T_SHIP_SIGNING":  signingSecret,
	}
	require.NoError(t, run(context.Background(), []string{"worker", "migrate"}, getenv(env), io.Discard, io.Discard))
	addr := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"worker", "--listen", addr}, getenv(env), io.Discard, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	proctest.WaitHealthy(t, "http://"+addr+"/healthz", done)
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, readyz())

	setReadOnly(t, cluster, true)
	require.Eventually(t, func() bool { return readyz() == http.StatusServiceUnavailable },
		30*time.Second, 20*time.Millisecond, "a read-only database makes the worker unready")
	setReadOnly(t, cluster, false)
	require.Eventually(t, func() bool { return readyz() == http.StatusOK },
		30*time.Second, 20*time.Millisecond, "writable again, the worker is ready")
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
