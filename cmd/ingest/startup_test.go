package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
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
// accepting connections at once, lets a request already in flight finish
// and commit, and only then returns.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := signStripe(stripeEvent("evt_inflight", "invoice.paid"), stripeSecret, time.Now())

	// A request whose body is still to come when the shutdown begins. With
	// Expect: 100-continue the server says when its handler starts reading
	// the body: from then on the request is in flight.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nStripe-Signature: %s\r\nContent-Length: %d\r\n\r\n", req.header.Get("Stripe-Signature"), len(req.body))
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
	_, err = r.ReadString('\n')
	require.NoError(t, err)

	stopped := make(chan error, 1)
	go func() { stopped <- b.stop() }()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the listener closes at once")
	select {
	case err := <-stopped:
		t.Fatalf("run returned with a request in flight: %v", err)
	default:
	}

	_, err = conn.Write(req.body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"received":true,"duplicate":false}`, string(body))
	require.NoError(t, <-stopped)
	_, ok := b.claimRow(t, "stripe", "evt_inflight")
	require.True(t, ok, "the in-flight event was committed before the pool closed")
}
