// Command worker performs the side effects: it runs the River workers that
// deliver each event to its routes, the reconciler and retention, and the
// ops endpoints. `worker migrate` applies the database migrations; `worker
// claims` lists, shows, retries, prunes and exports claims; `worker routes`
// lists, pauses and resumes routes.
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
	os.Exit(cli.Exit("worker", run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}
