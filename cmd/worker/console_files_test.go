package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
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
	}, nil)
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Equal(t, "a-password-long-enough", string(files["alice"].Value()))
	require.Contains(t, files, "ci")

	_, err = consoleSecretFiles(config.Console{Tokens: []config.ConsoleToken{{Name: "ci", TokenFile: short}}}, nil)
	require.ErrorContains(t, err, "console.tokens[0].token_file: file "+short+" holds fewer than 12 characters")
	require.NotContains(t, err.Error(), "tiny-secret")

	_, err = consoleSecretFiles(config.Console{Users: []config.ConsoleUser{{Name: "alice", PasswordFile: good + ".missing"}}}, nil)
	require.ErrorContains(t, err, "console.users[0].password_file: cannot read "+good+".missing")
}
