package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// writeConfig writes a config whose one route posts to url and returns its path.
func writeConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
worker:
  concurrency: 4
  shutdown_timeout: 2s
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [T_STRIPE]
routes:
  - name: ship
    provider: stripe
    events: ["*"]
    url: %s/ship
    max_attempts: 3
    backoff: {initial: 10ms, max: 100ms}
    signing_secret_env: T_SHIP_SIGNING
`, url)), 0o600))
	return path
}

// appendConfig adds text to the end of the config file at path and returns
// path. The file writeConfig writes ends inside its route, so text indented
// as a route key ("    secret_headers: ...") adds to the ship route, and
// text at the left margin adds a section.
func appendConfig(t *testing.T, path, text string) string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// workerEnv is the environment a worker on db with the config at cfg needs
// to start: the database, the config file, and the secrets writeConfig and
// consoleSection name.
func workerEnv(db *dbtest.DB, cfg string) map[string]string {
	return map[string]string{
		"DATABASE_URL": db.URL, "HOOKGATE_CONFIG": cfg, "T_STRIPE": "whsec_stripe", "T_SHIP_SIGNING": signingSecret,
		"T_ALICE": alicePassword, "T_CI": "ci-token-abcdefghijkl",
	}
}

// testWorker is a worker serving in-process for one test, on an address of
// its own.
type testWorker struct {
	addr    string
	logs    *proctest.Buffer
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// serveWorker serves a worker in-process with env until the test ends, or
// until stop for a test that reads what the worker left behind. It returns
// once the worker answers /healthz.
func serveWorker(t *testing.T, env map[string]string) *testWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &testWorker{addr: proctest.FreeAddr(t), logs: &proctest.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- run(ctx, []string{"worker", "--listen", w.addr}, getenv(env), io.Discard, w.logs) }()
	t.Cleanup(func() {
		if w.stopped {
			return
		}
		returned, err := w.wait(30 * time.Second)
		if !returned {
			t.Error("worker did not stop")
			return
		}
		require.NoError(t, err)
	})
	proctest.WaitHealthy(t, "http://"+w.addr+"/healthz", w.done)
	return w
}

// stop cancels the worker, as SIGTERM does, and requires that it return
// without an error within 15 seconds.
func (w *testWorker) stop(t *testing.T) {
	t.Helper()
	returned, err := w.wait(15 * time.Second)
	if !returned {
		t.Fatal("worker did not stop")
	}
	require.NoError(t, err)
}

// wait cancels the worker and waits at most d for it to return; returned
// says whether it did, and err is what it returned.
func (w *testWorker) wait(d time.Duration) (returned bool, err error) {
	w.stopped = true
	w.cancel()
	select {
	case err := <-w.done:
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// startWorker serves a worker in-process until the test ends, and returns
// its ops address and its log.
func startWorker(t *testing.T, env map[string]string) (string, *proctest.Buffer) {
	t.Helper()
	w := serveWorker(t, env)
	return w.addr, w.logs
}

// newStore returns a claim store on db that enqueues delivery jobs with a
// River client that works none, and gives every route 3 attempts, as the
// routes writeConfig writes have: for tests that claim events as ingest
// would.
func newStore(t *testing.T, db *dbtest.DB) *claim.Store {
	t.Helper()
	jobs, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	return claim.NewStore(db.Pool, jobs, func(string) int { return 3 })
}

// claimEvent claims stripe's invoice.paid event id, with payload as its
// body, for the ship route, as ingest would on a first delivery.
func claimEvent(t *testing.T, store *claim.Store, id, payload string) {
	t.Helper()
	_, err := testfactory.ClaimEvent(t.Context(), store, claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", Payload: []byte(payload)},
		[]string{"ship"}, true)
	require.NoError(t, err)
}

// waitStatus waits at most 30 seconds for the claim of stripe's event id to
// reach want, and fails with the worker's log when it does not.
func waitStatus(t *testing.T, store *claim.Store, id string, want claim.Status, logs *proctest.Buffer) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, _, err := store.Get(t.Context(), "stripe", id)
		require.NoError(c, err)
		require.Equal(c, want, cl.Status)
	}, 30*time.Second, 20*time.Millisecond, "stripe/%s not %s:\n%s", id, want, logs)
}
