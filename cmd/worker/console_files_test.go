package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/sanitize"
)

// TestConsoleSecretFiles: password_file and token_file are opened at
// start by user or token name; a missing or short file stops the start
// naming its key, never quoting the contents.
func TestConsoleSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(good, []byte("a-password-long-enough\n"), 0o600))
	require.NoError(t, os.WriteFile(short, []byte("tiny-secret"), 0o600))

	files, err := consoleSecretFiles(config.Console{
		Users:  []config.ConsoleUser{{Name: "alice", PasswordFile: good}, {Name: "bob", PasswordEnv: "T_BOB"}},
		Tokens: []config.ConsoleToken{{Name: "ci", TokenFile: good}},
	}, nil, nil)
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Equal(t, "a-password-long-enough", string(files["alice"].Value()))
	require.Contains(t, files, "ci")

	_, err = consoleSecretFiles(config.Console{Tokens: []config.ConsoleToken{{Name: "ci", TokenFile: short}}}, nil, nil)
	require.ErrorContains(t, err, "console.tokens[0].token_file: file "+short+" holds fewer than 12 characters")
	require.NotContains(t, err.Error(), "tiny-secret")

	_, err = consoleSecretFiles(config.Console{Users: []config.ConsoleUser{{Name: "alice", PasswordFile: good + ".missing"}}}, nil, nil)
	require.ErrorContains(t, err, "console.users[0].password_file: cannot read "+good+".missing")
}

// TestConsoleSecretFileReloadChecked: read again, a token_file is held to
// the rule it met at start: a 1-character token is refused (the last good
// token stays, and the log names the key, never the value), and a valid
// new one is used and redacted from the next line on.
func TestConsoleSecretFileReloadChecked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ci-token")
	require.NoError(t, os.WriteFile(path, []byte("ci-token-at-start-0001\n"), 0o600))
	logs := &proctest.Buffer{}
	red := sanitize.NewRedactor()
	files, err := consoleSecretFiles(config.Console{Tokens: []config.ConsoleToken{{Name: "ci", TokenFile: path}}},
		slog.New(slog.NewJSONHandler(logs, nil)), red)
	require.NoError(t, err)
	f := files["ci"]

	require.NoError(t, os.WriteFile(path, []byte("x\n"), 0o600))
	require.Eventually(t, func() bool {
		return string(f.Value()) == "ci-token-at-start-0001" && strings.Contains(logs.String(), "secret file not reloaded")
	}, 30*time.Second, 20*time.Millisecond, "the short token was taken:\n%s", logs)
	require.Contains(t, logs.String(), `"key":"console.tokens[0].token_file"`)
	require.Contains(t, logs.String(), "holds fewer than 12 characters")
	require.NotContains(t, logs.String(), `x\n`)

	const rotated = "ci-token-rotated-00002"
	require.Equal(t, rotated, red.String(rotated), "not a secret yet")
	require.NoError(t, os.WriteFile(path, []byte(rotated+"\n"), 0o600))
	require.Eventually(t, func() bool { return string(f.Value()) == rotated }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, "echo [redacted]", red.String("echo "+rotated), "the new token is redacted at once")
}
