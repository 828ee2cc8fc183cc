package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
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
	logs := &proctest.Buffer{}
	go func() { done <- run(ctx, []string{"worker", "--listen", addr}, getenv(env), logs, logs) }()
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
	// River's client starts after the listener does, and a start that
	// meets a read-only database fails the start: the worker exits, for
	// its supervisor to start it again. What this test turns read-only is
	// a running worker's database.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "worker running") },
		30*time.Second, 20*time.Millisecond, "the worker never said it runs")
	require.Equal(t, http.StatusOK, readyz())

	// until polls readyz for want, and fails at once, with the worker's
	// logs, if the worker stopped on the way.
	until := func(want int, msg string) {
		t.Helper()
		var exited bool
		var err error
		ok := assert.Eventually(t, func() bool {
			select {
			case err = <-done:
				done <- err // for the cleanup
				exited = true
				return true
			default:
			}
			return readyz() == want
		}, 30*time.Second, 20*time.Millisecond, msg)
		if exited || !ok {
			t.Fatalf("%s (worker stopped: %t, %v); its logs:\n%s", msg, exited, err, logs.String())
		}
	}
	require.NoError(t, cluster.SetReadOnly(context.Background(), true))
	until(http.StatusServiceUnavailable, "a read-only database makes the worker unready")
	require.NoError(t, cluster.SetReadOnly(context.Background(), false))
	until(http.StatusOK, "writable again, the worker is ready")
}
