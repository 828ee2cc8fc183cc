package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// recreateDatabase drops and creates database name on the server adminURL
// names, and returns its URL.
func recreateDatabase(ctx context.Context, adminURL, name string) (string, error) {
	if err := dropDatabase(ctx, adminURL, name); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL is not a URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops database name on the server adminURL names, forcing
// off any session still connected, so that the check starts and ends clean.
func dropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// databases creates the check's two databases, hookgate's and n8n's, on the
// Postgres server DATABASE_URL names or on devtool's own, started here.
func (r *n8nCheckRun) databases(ctx context.Context, getenv func(string) string) error {
	// Postgres: the server DATABASE_URL names, or devtool's own.
	adminURL := getenv("DATABASE_URL")
	if adminURL != "" {
		r.con.printf("n8n-check", "using the Postgres server DATABASE_URL names")
	} else {
		cluster, cerr := startCluster(ctx, r.con, pgDir, pgPort)
		if cerr != nil {
			return cerr
		}
		r.onExit(func(err error) error {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err = errors.Join(err, cluster.Stop(sctx))
			r.con.printf("n8n-check", "stopped Postgres")
			return err
		})
		adminURL = cluster.URL("postgres")
		r.con.printf("n8n-check", "started Postgres from %s", pgDir)
	}
	hgURL, err := recreateDatabase(ctx, adminURL, n8nHookgateDB)
	if err != nil {
		return err
	}
	n8nURL, err := recreateDatabase(ctx, adminURL, n8nDB)
	if err != nil {
		return err
	}
	r.hgURL, r.n8nURL = hgURL, n8nURL
	r.con.printf("n8n-check", "created databases %s (hookgate) and %s (n8n, since its sqlite3 build is skipped)", n8nHookgateDB, n8nDB)
	if !r.keep {
		r.onExit(func(err error) error {
			for _, db := range []string{n8nHookgateDB, n8nDB} {
				err = errors.Join(err, dropDatabase(context.WithoutCancel(ctx), adminURL, db))
			}
			return err
		})
	}
	return nil
}
