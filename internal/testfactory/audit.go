package testfactory

import (
	"context"
	"testing"
)

// Audit inserts an audit row by actor at (default now) and returns its id.
func Audit(ctx context.Context, tb testing.TB, exec Executor, actor, action string, at *When) int64 {
	tb.Helper()
	rows, err := exec.Query(ctx, `INSERT INTO audit_log (at, actor, action)
VALUES (coalesce($4::timestamptz, now() - make_interval(secs => $1)), $2, $3)
RETURNING id`, at.seconds(), actor, action, at.instant())
	if err != nil {
		tb.Fatalf("testfactory: inserting audit row: %v", err)
	}
	defer rows.Close()
	var id int64
	if !rows.Next() {
		tb.Fatalf("testfactory: inserting audit row: %v", rows.Err())
	}
	if err := rows.Scan(&id); err != nil {
		tb.Fatalf("testfactory: inserting audit row: %v", err)
	}
	return id
}
