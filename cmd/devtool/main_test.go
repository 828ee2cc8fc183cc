package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
)

// asMain makes the test binary run devtool's main instead of the tests, for
// tests that need devtool as a process of its own.
const asMain = "DEVTOOL_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
	}
	// dbtest.Main checks for leaked goroutines once the tests pass.
	dbtest.Main(m)
}

// TestBrokenStdoutDoesNotKill runs devtool with its stdout a pipe nobody
// reads, as after `make run | tee log` when Ctrl-C ends tee first: devtool
// must keep going (and so stop its children in order), not die of SIGPIPE.
func TestBrokenStdoutDoesNotKill(t *testing.T) {
	t.Parallel()
	addr := proctest.FreeAddr(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close()) // every write to w now fails with EPIPE
	cmd := exec.Command(os.Args[0], "receive", "--listen", addr)
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.Stdout, cmd.Stderr = w, io.Discard
	require.NoError(t, cmd.Start())
	require.NoError(t, w.Close())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	proctest.WaitHealthy(t, "http://"+addr+"/healthz", exited)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, "devtool stops cleanly, though nothing reads its output")
}

func TestRunDispatch(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		args    []string
		wantErr string // "" when run returns flag.ErrHelp
		wantOut string
	}{
		{name: "no command", args: []string{"devtool"}, wantErr: "no command given", wantOut: "usage: devtool"},
		{name: "unknown command", args: []string{"devtool", "deploy"}, wantErr: `unknown command "deploy"`, wantOut: "usage: devtool"},
		{name: "help", args: []string{"devtool", "help"}, wantOut: "Commands:"},
		{name: "command help", args: []string{"devtool", "send", "--help"}, wantOut: "--times"},
		{name: "stray argument", args: []string{"devtool", "receive", "extra"}, wantErr: "receive takes no arguments"},
		{name: "stop with an argument", args: []string{"devtool", "stop", "now"}, wantErr: "stop takes no arguments"},
		{name: "times below one", args: []string{"devtool", "send", "--times", "0"}, wantErr: "--times must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, &out)
			if tt.wantErr == "" {
				require.ErrorIs(t, err, flag.ErrHelp)
				require.Equal(t, 0, exitCode(err, &out))
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
			require.Contains(t, out.String(), tt.wantOut)
		})
	}
}
