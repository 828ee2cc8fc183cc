package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/dbtest"
)

// writeSecret replaces path the way Kubernetes updates a mounted secret:
// the new contents are written beside it and renamed over it.
func writeSecret(t *testing.T, path, value string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(value), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func secretFileConfig(path string) string {
	return fmt.Sprintf(`
providers:
  - {name: paddle, scheme: paddle, secrets_file: [%q]}
routes:
  - {name: paddle-all, provider: paddle, events: ["*"], url: "http://127.0.0.1:1/p"}
`, path)
}

// TestRotatedSecretFileIsPickedUpWithoutRestart: a provider's secret read
// from a file is re-read when the file changes; once the new one is in
// use, the old one is refused.
func TestRotatedSecretFileIsPickedUpWithoutRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "paddle-secret")
	oldSecret, newSecret := "pdl_ntfset_old_0000000000000000", "pdl_ntfset_new_1111111111111111"
	writeSecret(t, path, oldSecret+"\n") // a trailing newline is not part of the secret
	db := dbtest.NewDB(t)
	s := startWith(t, db.URL, secretFileConfig(path), nil)

	require.Equal(t, accepted, s.post(t, signPaddle(oldSecret, time.Now(), paddleEvent("evt_before"))).body)
	require.Equal(t, http.StatusUnauthorized, s.post(t, signPaddle(newSecret, time.Now(), paddleEvent("evt_early"))).status)

	writeSecret(t, path, newSecret)
	var n atomic.Int64
	require.Eventually(t, func() bool {
		id := fmt.Sprintf("evt_after_%d", n.Add(1))
		return s.post(t, signPaddle(newSecret, time.Now(), paddleEvent(id))).status == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the new secret is accepted without a restart")

	r := s.post(t, signPaddle(oldSecret, time.Now(), paddleEvent("evt_old_again")))
	require.Equal(t, http.StatusUnauthorized, r.status, "the old secret is refused once the new one is in use")
	_, ok := s.claimRow(t, "paddle", "evt_old_again")
	require.False(t, ok)
	require.Contains(t, s.logs.String(), "secret files changed")
	require.NotContains(t, s.logs.String(), oldSecret)
	require.NotContains(t, s.logs.String(), newSecret)

	// A broken file (emptied mid-rotation) keeps the last good secret.
	writeSecret(t, path, "")
	require.Eventually(t, func() bool {
		s.post(t, signPaddle(newSecret, time.Now(), paddleEvent(fmt.Sprintf("evt_empty_%d", n.Add(1)))))
		return bytes.Contains([]byte(s.logs.String()), []byte("secret file not reloaded"))
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, accepted, s.post(t, signPaddle(newSecret, time.Now(), paddleEvent("evt_still_new"))).body)
}

func TestSecretFileProblemsStopTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := dbtest.NewDB(t)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for name, tc := range map[string]struct{ path, want string }{
		"missing": {filepath.Join(dir, "missing"), "providers[0].secrets_file[0]: cannot read " + filepath.Join(dir, "missing") + ": no such file or directory"},
		"empty":   {empty, "providers[0].secrets_file[0]: file " + empty + " is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(dir, name+".yaml")
			require.NoError(t, os.WriteFile(cfg, []byte(secretFileConfig(tc.path)), 0o600))
			env := testEnv(db.URL)
			var stderr bytes.Buffer
			err := run(context.Background(), []string{"ingest", "--config", cfg, "--listen", "127.0.0.1:0"},
				func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
			require.Error(t, err)
			cli.Exit("ingest", err, &stderr)
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}
