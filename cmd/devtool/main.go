// Command devtool runs hookgate on a developer's machine: `devtool run` starts
// Postgres, ingest, worker and a demo receiver together, `devtool send` posts a
// signed demo event, `devtool receive` is that demo receiver, `devtool
// n8n-check` checks docs/n8n.md against a real n8n it installs, and `devtool
// lab` compares duplicate effects, lost events and recoveries of five
// designs, hookgate among them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hookgate/hookgate/internal/lab"
	"github.com/hookgate/hookgate/internal/n8ncheck"
)

func main() {
	// Output piped to another program (`make run | tee log`) must not kill
	// devtool when that program ends first, on the same Ctrl-C: devtool
	// would die without stopping its children and Postgres. Ignored, a
	// write to the closed pipe fails instead, and devtool goes on stopping.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}

const usage = `usage: devtool <command> [flags]

Commands:
  run      start Postgres (unless DATABASE_URL is set), ingest, worker and the
           demo receiver, with output prefixed per process; Ctrl-C stops all
  send     post one signed Standard Webhooks event to ingest, several times
  receive  serve the demo downstream, printing one line per delivery
  stop     stop the local Postgres in .local/pg if one still runs there
  n8n-check  install a pinned n8n into .local/n8n and check docs/n8n.md
           against it: duplicates, failures, restarts, the worked example
  lab      the Webhook Retry Lab: five designs against concurrent copies, a
           lost ack and crashes before and after the side effect; prints the
           table and writes .local/lab/report.html (docs/lab.md)

Run "devtool <command> --help" for a command's flags.`

// run dispatches to the subcommand named by args[1].
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command given")
	}
	switch cmd, rest := args[1], args[2:]; cmd {
	case "run":
		return runSystem(ctx, rest, getenv, stdout, stderr)
	case "send":
		return send(ctx, rest, getenv, stdout, stderr)
	case "receive":
		return receive(ctx, rest, stdout, stderr)
	case "stop":
		return stopLocal(rest, stdout, stderr)
	case "n8n-check":
		return n8ncheck.Run(ctx, rest, getenv, stdout, stderr)
	case "lab":
		return lab.Run(ctx, rest, getenv, stdout, stderr)
	case lab.DesignCommand: // one design of the lab, run by `devtool lab` only
		return lab.ServeDesign(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return flag.ErrHelp
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// exitCode turns run's error into a process exit code, printing it as one
// line; --help exits 0.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "devtool: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	return 1
}
