package main

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
