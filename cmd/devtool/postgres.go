package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// stopLocal is `devtool stop`: it stops the Postgres `devtool run` keeps in
// devlocal.PGDir if one still runs there, so that `make clean` never deletes a data
// directory under a live server.
func stopLocal(args []string, stdout, stderr io.Writer) error {
	fs := devlocal.NewFlagSet("stop", "stop", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("stop takes no arguments, got %q", fs.Args())
	}
	return devlocal.StopLeftoverServer(devlocal.PGDir, devlocal.NewConsole(stdout))
}

// runPostgres is the Postgres `devtool run` uses: the server DATABASE_URL
// names, or devtool's own, started here. stop stops the latter, and is nil
// for the former, which is not devtool's to stop.
func runPostgres(ctx context.Context, con *devlocal.Console, getenv func(string) string) (dbURL string, stop func() error, err error) {
	dbURL = getenv("DATABASE_URL")
	if dbURL != "" {
		con.Printf("devtool", "using DATABASE_URL from the environment; no local Postgres started")
		return dbURL, nil, nil
	}
	cluster, cerr := devlocal.StartCluster(ctx, con, devlocal.PGDir, devlocal.PGPort)
	if cerr != nil {
		return "", nil, cerr
	}
	stop = func() error {
		con.Printf("devtool", "stopping Postgres")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if serr := cluster.Stop(sctx); serr != nil {
			return serr
		}
		con.Printf("devtool", "Postgres stopped")
		return nil
	}
	dbURL = cluster.URL("postgres")
	con.Printf("devtool", "Postgres is up (log: %s): DATABASE_URL=%s", filepath.Join(devlocal.PGDir, "server.log"), dbURL)
	return dbURL, stop, nil
}
