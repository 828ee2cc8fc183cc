package devsecret

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// A kept secret is made once, readable by its owner only, and read back
// on the next run; a file someone left too open is closed to its owner,
// and one too short to be a console secret is replaced.
func TestKeptSecret(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "local", "console-password-operator")
	first, err := keptSecret(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(first), config.MinConsoleSecret)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.Chmod(path, 0o644))
	again, err := keptSecret(path)
	require.NoError(t, err)
	require.Equal(t, first, again)
	info, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	replaced, err := keptSecret(path)
	require.NoError(t, err)
	require.NotEqual(t, "short", replaced)
	require.GreaterOrEqual(t, len(replaced), config.MinConsoleSecret)
}

// Users with a password_file are their own; the banner says the console
// is off when nobody is named.
func TestConsoleLeavesFilesAlone(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Console: config.Console{Users: []config.ConsoleUser{{Name: "carol", Role: "viewer", PasswordFile: "/run/secrets/carol"}}}}
	env, logins, err := Console(cfg, func(string) string { return "" }, t.TempDir())
	require.NoError(t, err)
	require.Empty(t, env)
	require.Empty(t, logins)
	require.Contains(t, Banner(&config.Config{}, "http://127.0.0.1:9091", nil), "console   off")
}
