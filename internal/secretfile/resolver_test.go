package secretfile_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/secretfile"
)

// TestResolverHoldsEnvAndFileToOneCheck: a secret from the environment and
// one from a file meet the same check at start, each refusal naming the
// key and never the value; a file's rotated value reaches Redact before
// Value returns it, and one the check refuses keeps the last good value.
func TestResolverHoldsEnvAndFileToOneCheck(t *testing.T) {
	t.Parallel()
	check := func(b []byte) error {
		if len(b) < 8 {
			return errors.New("holds fewer than 8 characters")
		}
		return nil
	}
	var mu sync.Mutex
	var redacted []string
	logs := &syncBuffer{}
	res := secretfile.Resolver{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Redact: func(v ...string) {
		mu.Lock()
		defer mu.Unlock()
		redacted = append(redacted, v...)
	}}

	_, err := res.Env("r.secret_env", "SHIP_SECRET", []byte("short"), check)
	require.EqualError(t, err, "r.secret_env: SHIP_SECRET holds fewer than 8 characters")
	_, err = res.Env("r.secret_env", "SHIP_SECRET", nil, check)
	require.EqualError(t, err, "r.secret_env: environment variable SHIP_SECRET is not set or empty")
	env, err := res.Env("r.secret_env", "SHIP_SECRET", []byte("env-secret-1"), check)
	require.NoError(t, err)
	require.Equal(t, "env-secret-1", string(env.Value()))

	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	_, err = res.File(path, "r.secret_file", check)
	require.EqualError(t, err, "r.secret_file: file "+path+" holds fewer than 8 characters")

	require.NoError(t, os.WriteFile(path, []byte("file-secret-1\n"), 0o600))
	file, err := res.File(path, "r.secret_file", check)
	require.NoError(t, err)
	require.Equal(t, "file-secret-1", string(file.Value()))

	require.NoError(t, os.WriteFile(path, []byte("tiny\n"), 0o600))
	require.Eventually(t, func() bool {
		return string(file.Value()) == "file-secret-1" && strings.Contains(logs.String(), "secret file not reloaded")
	}, 30*time.Second, 20*time.Millisecond, "refused on a re-read as at start")

	require.NoError(t, os.WriteFile(path, []byte("file-secret-2\n"), 0o600))
	require.Eventually(t, func() bool {
		v := string(file.Value())
		mu.Lock()
		defer mu.Unlock()
		return v == "file-secret-2" && len(redacted) == 1
	}, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"file-secret-2"}, redacted, "only the rotated value, redacted before use")
}
