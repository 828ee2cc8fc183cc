// Command ingest serves the webhook endpoint: it verifies, claims and
// enqueues each event before acknowledging it. `ingest migrate` applies the
// database migrations.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookgate/hookgate/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Exit("ingest", run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}
