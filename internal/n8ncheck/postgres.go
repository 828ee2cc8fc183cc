package n8ncheck

import (
	"context"
	"errors"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// databases creates the check's two databases, hookgate's and n8n's, on the
// Postgres server DATABASE_URL names or on devtool's own, started here.
func (r *n8nCheckRun) databases(ctx context.Context, getenv func(string) string) error {
	// Postgres: the server DATABASE_URL names, or devtool's own.
	adminURL := getenv("DATABASE_URL")
	if adminURL != "" {
		r.con.Printf("n8n-check", "using the Postgres server DATABASE_URL names")
	} else {
		cluster, cerr := devlocal.StartCluster(ctx, r.con, devlocal.PGDir, devlocal.PGPort)
		if cerr != nil {
			return cerr
		}
		r.onExit(func(err error) error {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err = errors.Join(err, cluster.Stop(sctx))
			r.con.Printf("n8n-check", "stopped Postgres")
			return err
		})
		adminURL = cluster.URL("postgres")
		r.con.Printf("n8n-check", "started Postgres from %s", devlocal.PGDir)
	}
	hgURL, err := devlocal.RecreateDatabase(ctx, adminURL, n8nHookgateDB)
	if err != nil {
		return err
	}
	n8nURL, err := devlocal.RecreateDatabase(ctx, adminURL, n8nDB)
	if err != nil {
		return err
	}
	r.hgURL, r.n8nURL = hgURL, n8nURL
	r.con.Printf("n8n-check", "created databases %s (hookgate) and %s (n8n, since its sqlite3 build is skipped)", n8nHookgateDB, n8nDB)
	if !r.keep {
		r.onExit(func(err error) error {
			for _, db := range []string{n8nHookgateDB, n8nDB} {
				err = errors.Join(err, devlocal.DropDatabase(context.WithoutCancel(ctx), adminURL, db))
			}
			return err
		})
	}
	return nil
}
