package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/devsecret"
)

func TestLocalURL(t *testing.T) {
	t.Parallel()

	for listen, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080",
		"0.0.0.0:9091":   "http://127.0.0.1:9091",
		"[::]:9091":      "http://127.0.0.1:9091",
		"127.0.0.1:9099": "http://127.0.0.1:9099",
		"localhost:8080": "http://localhost:8080",
	} {
		require.Equal(t, want, localURL(listen), listen)
	}
}

func TestBanner(t *testing.T) {
	t.Parallel()

	cfg, err := config.Parse([]byte(secretsConfig))
	require.NoError(t, err)
	b := banner(cfg, "http://127.0.0.1:8080", "http://127.0.0.1:9091", "http://127.0.0.1:9099", false, nil)
	for _, want := range []string{
		"http://127.0.0.1:8080/webhooks/demo\n",
		"http://127.0.0.1:8080/webhooks/stripe\n",
		"http://127.0.0.1:8080/webhooks/github\n",
		"http://127.0.0.1:9091  (/healthz",
		"set HOOKGATE_UI_PASSWORD",
		"http://127.0.0.1:9099",
		"make send-demo",
	} {
		require.Contains(t, b, want)
	}
	require.True(t, strings.Contains(banner(cfg, "a", "http://w", "c", true, nil), "http://w/riverui/  (user admin"))

	help := claimsHelp("postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable", ".local/bin/worker", "hookgate.example.yaml")
	require.Contains(t, help, "make claims ARGS='list'")
	require.Contains(t, help, "DATABASE_URL='postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable' .local/bin/worker --config hookgate.example.yaml claims list")
}

// make run's console: a password for each user left unset, generated
// once and kept in the local directory for its owner only, the same on
// the next run; a variable the user set is used and never replaced; the
// banner names the console's URL and how to sign in.
func TestConsoleSecretsKeptLocally(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(secretsConfig + `
console:
  users:
    - {name: operator, role: operator, password_env: HOOKGATE_CONSOLE_PASSWORD}
    - {name: bob, role: viewer, password_env: BOB_PASSWORD}
  tokens:
    - {name: ci-bot, role: viewer, token_env: CI_TOKEN}
`))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), ".local")
	getenv := func(k string) string { return map[string]string{"BOB_PASSWORD": "bobs-own-password"}[k] }
	env, logins, err := devsecret.Console(cfg, getenv, dir)
	require.NoError(t, err)
	require.NotContains(t, env, "BOB_PASSWORD", "set by the user: left alone")
	password := env["HOOKGATE_CONSOLE_PASSWORD"]
	require.GreaterOrEqual(t, len(password), config.MinConsoleSecret)
	require.GreaterOrEqual(t, len(env["CI_TOKEN"]), config.MinConsoleSecret)
	kept := filepath.Join(dir, "console-password-operator")
	info, err := os.Stat(kept)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
	require.Equal(t, []devsecret.Login{
		{Name: "operator", Role: "operator", Env: "HOOKGATE_CONSOLE_PASSWORD", Password: password, File: kept},
		{Name: "bob", Role: "viewer", Env: "BOB_PASSWORD"},
	}, logins)

	again, _, err := devsecret.Console(cfg, getenv, dir)
	require.NoError(t, err)
	require.Equal(t, env, again, "the same secrets on the next run")

	b := banner(cfg, "http://127.0.0.1:8080", "http://127.0.0.1:9091", "http://127.0.0.1:9099", false, logins)
	require.Contains(t, b, "console   http://127.0.0.1:9091/console/\n")
	require.Contains(t, b, "sign in as operator (operator), password "+password+"  (kept in "+kept+")")
	require.Contains(t, b, "sign in as bob (viewer), password $BOB_PASSWORD")
	require.NotContains(t, b, "bobs-own-password")
	require.NotContains(t, b, env["CI_TOKEN"])

	off, err := config.Parse([]byte(secretsConfig))
	require.NoError(t, err)
	require.Contains(t, banner(off, "a", "http://w", "c", false, nil), "console   off")
}

// The example configuration's console is on, with a local operator whose
// password make run generates.
func TestExampleConfigServesTheConsole(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../../hookgate.example.yaml")
	require.NoError(t, err)
	require.True(t, cfg.Console.Enabled())
	env, logins, err := devsecret.Console(cfg, func(string) string { return "" }, t.TempDir())
	require.NoError(t, err)
	require.Len(t, logins, 1)
	require.Equal(t, "operator", logins[0].Role)
	_, err = cfg.ResolveConsoleSecrets(func(k string) string { return env[k] })
	require.NoError(t, err, "the worker starts with what make run sets")
}
