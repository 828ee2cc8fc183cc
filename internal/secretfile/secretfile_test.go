package secretfile_test

import (
	"bytes"
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

// syncBuffer is a log sink safe for the file's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRulesAtStartAndOnReload: contents that fail the rules stop Open,
// naming the key and not the contents; read again, they leave the last
// good value in place with one warning naming the key; a good new value is
// handed to Changed before Value returns it.
func TestRulesAtStartAndOnReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	rules := secretfile.Rules{Check: func(b []byte) error {
		if len(b) < 8 {
			return errors.New("holds fewer than 8 characters")
		}
		return nil
	}}
	var changed []string
	rules.Changed = func(b []byte) { changed = append(changed, string(b)) }

	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	_, err := secretfile.OpenWith(path, "k.secret_file", nil, rules)
	require.EqualError(t, err, "k.secret_file: file "+path+" holds fewer than 8 characters")

	require.NoError(t, os.WriteFile(path, []byte("long-enough-1\n"), 0o600))
	logs := &syncBuffer{}
	f, err := secretfile.OpenWith(path, "k.secret_file", slog.New(slog.NewJSONHandler(logs, nil)), rules)
	require.NoError(t, err)
	require.Equal(t, "long-enough-1", string(f.Value()))
	require.Empty(t, changed, "the value at start is no change")

	require.NoError(t, os.WriteFile(path, []byte("tiny\n"), 0o600))
	require.Eventually(t, func() bool {
		return string(f.Value()) == "long-enough-1" && strings.Contains(logs.String(), "secret file not reloaded")
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, logs.String(), `"key":"k.secret_file"`)
	require.NotContains(t, logs.String(), "tiny")

	require.NoError(t, os.WriteFile(path, []byte("long-enough-2\n"), 0o600))
	require.Eventually(t, func() bool { return string(f.Value()) == "long-enough-2" }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"long-enough-2"}, changed)
	require.Equal(t, 1, strings.Count(logs.String(), "secret file not reloaded"), "logged once per problem")
}
