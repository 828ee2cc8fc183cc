package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/cli"
)

// TestStartupErrors checks that a bad start stops at once with one line
// that names the problem, and never prints a secret.
func TestStartupErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	good := write("good.yaml", testConfig)
	typo := write("typo.yaml", strings.Replace(testConfig, "max_body_bytes", "max_body_byte", 1))
	env := testEnv("postgres://127.0.0.1:1/none")

	cases := []struct {
		name   string
		args   []string
		unset  string
		want   string
		config string
	}{
		{name: "missing config file", args: []string{"--config", filepath.Join(dir, "missing.yaml")},
			want: "ingest: config file " + filepath.Join(dir, "missing.yaml") + " does not exist (set --config or HOOKGATE_CONFIG)"},
		{name: "typo'd key", args: []string{"--config", typo},
			want: `unknown key "max_body_byte" (in ingest)`},
		{name: "missing secret", args: []string{"--config", good}, unset: "T_STRIPE_OLD",
			want: "ingest: providers[0].secrets_env[1]: environment variable T_STRIPE_OLD is not set or empty"},
		{name: "no DATABASE_URL", args: []string{"--config", good}, unset: "DATABASE_URL",
			want: "ingest: DATABASE_URL is not set"},
		{name: "HOOKGATE_CONFIG names the file", config: filepath.Join(dir, "nope.yaml"),
			want: "ingest: config file " + filepath.Join(dir, "nope.yaml") + " does not exist"},
		{name: "stray argument", args: []string{"--config", good, "serve"}, want: `ingest: unknown command "serve"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == tc.unset {
					return ""
				}
				if k == "HOOKGATE_CONFIG" {
					return tc.config
				}
				return env[k]
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"ingest"}, tc.args...), getenv, &stdout, &stderr)
			require.Error(t, err)
			code := cli.Exit("ingest", err, &stderr)
			require.Equal(t, 1, code)
			out := stderr.String()
			require.Contains(t, out, tc.want)
			require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			for _, secret := range []string{stripeSecret, stripeOld, githubSecret, shopSecret, swSecret, acmeSecret} {
				require.NotContains(t, out, secret)
			}
		})
	}

	t.Run("--help shows variable names, never values", func(t *testing.T) {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"ingest", "--help"}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
		require.ErrorIs(t, err, cli.ErrHelp)
		require.Equal(t, 0, cli.Exit("ingest", err, &stderr))
		require.Contains(t, stderr.String(), "DATABASE_URL")
		require.NotContains(t, stderr.String(), stripeSecret)
	})
}

// TestGracefulShutdown: cancelling run's context (what SIGTERM does) stops
// the server cleanly and run returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.stop())
	_, err := client.Get(b.base + "/healthz")
	require.Error(t, err, "no longer listening")
}
