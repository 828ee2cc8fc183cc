package testfactory

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/claim"
)

// update builds one UPDATE statement with numbered arguments.
type update struct {
	sets []string
	args []any
}

// arg adds v and returns its placeholder.
func (u *update) arg(v any) string {
	u.args = append(u.args, v)
	return fmt.Sprintf("$%d", len(u.args))
}

// set adds one assignment; each %s in format is a placeholder for the next
// of vs.
func (u *update) set(format string, vs ...any) { u.sets = append(u.sets, u.fill(format, vs...)) }

func (u *update) setTime(column string, w *When) {
	if w != nil {
		u.set(column+" = coalesce(%s::timestamptz, now() - make_interval(secs => %s))", w.instant(), w.seconds())
	}
}

func (u *update) fill(format string, vs ...any) string {
	ph := make([]any, len(vs))
	for i, v := range vs {
		ph[i] = u.arg(v)
	}
	return fmt.Sprintf(format, ph...)
}

func (u *update) run(ctx context.Context, tb testing.TB, exec Executor, table, where string, vs ...any) {
	tb.Helper()
	if len(u.sets) == 0 {
		tb.Fatalf("testfactory: nothing to change in %s", table)
	}
	sql := "UPDATE " + table + " SET " + strings.Join(u.sets, ", ") + " WHERE " + u.fill(where, vs...)
	tag, err := exec.Exec(ctx, sql, u.args...)
	if err != nil {
		tb.Fatalf("testfactory: updating %s: %v", table, err)
	}
	if tag.RowsAffected() == 0 {
		tb.Fatalf("testfactory: no row of %s matched %v", table, vs)
	}
}

func (u *update) jobs(ctx context.Context, tb testing.TB, exec Executor, statement string, where JobWhere) []int64 {
	tb.Helper()
	if strings.HasPrefix(statement, "UPDATE") && len(u.sets) == 0 {
		tb.Fatalf("testfactory: nothing to change in river_job")
	}
	k := where.Delivery
	sql := statement + " WHERE " + u.fill(`(%s = 0 OR id = %s)
  AND (%s = '' OR (kind = %s AND args->>'provider' = %s AND args->>'event_id' = %s AND (%s = '' OR args->>'route' = %s)))
  AND (%s = '' OR state::text = %s)
RETURNING id`, where.ID, where.ID, k.EventID, claim.DeliveryKind, k.Provider, k.EventID, k.Route, k.Route,
		string(where.State), string(where.State))
	rows, err := exec.Query(ctx, "WITH j AS ("+sql+") SELECT id FROM j ORDER BY id", u.args...)
	if err == nil {
		var ids []int64
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err == nil && len(ids) == 0 {
			tb.Fatalf("testfactory: no River job matched %+v", where)
		}
		if err == nil {
			return ids
		}
	}
	tb.Fatalf("testfactory: changing River jobs: %v", err)
	return nil
}
