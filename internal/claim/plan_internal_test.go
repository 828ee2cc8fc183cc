package claim

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestJobEndsFollowPrimaryKeysWhenStatisticsLag plans the statements that
// end a batch of delivery jobs where the planner's statistics say a few
// deliveries are processing and jobs running, while thousands are: a
// worker catching up on a backlog that built faster than autovacuum
// analyzes. Each must find its rows through primary keys (or ctids), never
// by scanning a table or the processing index, which would read every
// processing delivery for every batch.
func TestJobEndsFollowPrimaryKeysWhenStatisticsLag(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	const n = 5000
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type, completed_at)
SELECT 'stripe', 'evt_' || g, 'invoice.paid', 'completed', '{}', 'application/json', now() FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
SELECT 'stripe', 'evt_' || g, 'ship', CASE WHEN g <= 20 THEN 'processing' ELSE 'completed' END,
       CASE WHEN g > 20 THEN now() END
FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO river_job (args, kind, max_attempts, state, attempt, attempted_at, finalized_at)
SELECT '{}', 'hookgate.delivery', 10, 'completed', 1, now(), now() FROM generate_series(1, %d) g`, n),
		`ANALYZE webhook_event_claims, webhook_deliveries, river_job`,
		`UPDATE webhook_event_claims SET status = 'processing', completed_at = NULL`,
		`UPDATE webhook_deliveries SET status = 'processing', completed_at = NULL`,
		`UPDATE river_job SET state = 'running', finalized_at = NULL`,
	} {
		_, err := tx.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
	requireJobEndsByKeys(t, tx, 8, func(i int) int { return 1000 + i*400 })
}

// TestJobEndsFollowPrimaryKeysOnSmallTables plans the same statements as
// the worker's prepared statements keep them: generic plans, made while
// the tables held a few thousand rows with their statistics up to date,
// for a batch of 128 ends (a drain's). Updating through a join, Postgres
// found a hash join over a scan of every delivery, claim or job cheaper
// than 128 lookups at that size, and so read each table whole for every
// batch, more as it grew, until its plan changed.
func TestJobEndsFollowPrimaryKeysOnSmallTables(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	const n = 3000
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type)
SELECT 'stripe', 'evt_' || g, 'invoice.paid', 'processing', '{}', 'application/json' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO webhook_deliveries (provider, event_id, route, status)
SELECT 'stripe', 'evt_' || g, 'ship', 'processing' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO river_job (args, kind, max_attempts, state, attempt, attempted_at)
SELECT '{}', 'hookgate.delivery', 10, 'running', 1, now() FROM generate_series(1, %d) g`, n),
		`ANALYZE webhook_event_claims, webhook_deliveries, river_job`,
		`SET LOCAL plan_cache_mode = force_generic_plan`,
	} {
		_, err := tx.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
	requireJobEndsByKeys(t, tx, 128, func(i int) int { return 1 + i*20 })
}

// requireJobEndsByKeys plans each statement that ends a batch of jobs, for
// a batch of the deliveries of evt_<event(i)> (route ship) and the batch's
// number of the latest jobs, and fails if a plan scans a table or reads an
// index other than a primary key.
func requireJobEndsByKeys(t *testing.T, tx pgx.Tx, batch int, event func(i int) int) {
	t.Helper()
	ctx := context.Background()
	providers, ids, routes, statuses := make([]string, batch), make([]string, batch), make([]string, batch), make([]string, batch)
	counts, spent, jobs, attempts := make([]int32, batch), make([]int32, batch), make([]int64, batch), make([]int32, batch)
	for i := range batch {
		providers[i], ids[i], routes[i], statuses[i] = "stripe", fmt.Sprintf("evt_%d", event(i)), "ship", "completed"
		counts[i], attempts[i] = 1, 1
	}
	require.NoError(t, tx.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM river_job ORDER BY id DESC LIMIT $1) j`, batch).Scan(&jobs))
	nulls := make([]*string, batch)
	calls := newCallColumns(batch)
	for i := range batch {
		response := "ok"
		calls.set(i, &Call{Attempt: 1, StartedAt: time.Now(), Status: 200, Response: &response})
	}
	for _, s := range []struct {
		name string
		sql  string
		args []any
	}{
		{"loading deliveries", loadDeliveriesSQL, []any{providers, ids, routes}},
		{"locking claims", lockClaimsSQL, []any{providers, ids}},
		{"locking running jobs", lockRunningJobsSQL, []any{jobs, attempts}},
		{"recording attempts", recordAttemptsSQL, []any{providers, ids, routes, statuses, counts, nulls, spent, nulls, jobs, attempts,
			calls.nums, calls.starts, calls.durations, calls.statuses, calls.responses,
			calls.requests, calls.responseHeaders, calls.runAttempts, calls.runMaxes}},
		{"ending jobs", deleteJobsSQL, []any{jobs, attempts}},
		{"releasing waiting deliveries", releaseSQL, []any{providers, ids}},
	} {
		for _, scan := range planScans(t, tx, s.sql, s.args...) {
			require.Falsef(t, scan.Type == "Seq Scan", "%s scans %s", s.name, scan.Relation)
			if scan.Index != "" {
				require.Truef(t, strings.HasSuffix(scan.Index, "_pkey"), "%s reads %s through %s", s.name, scan.Relation, scan.Index)
			}
		}
	}
}

// scan is one node of a plan that reads a relation.
type scan struct{ Type, Relation, Index string }

// planScans returns the scans of the plan Postgres makes for sql with args.
// Under plan_cache_mode force_generic_plan that is the generic plan, the
// one a prepared statement runs on: EXPLAIN of sql with bound arguments
// would plan with their values, whatever the setting, so the statement is
// prepared and its plan read through EXPLAIN EXECUTE, which takes it from
// the plan cache (with NULL for every argument, which a generic plan does
// not look at).
func planScans(t *testing.T, tx pgx.Tx, sql string, args ...any) []scan {
	t.Helper()
	ctx := context.Background()
	var mode string
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
	var out []byte
	if mode == "force_generic_plan" {
		_, err := tx.Exec(ctx, "PREPARE plan_scans AS "+sql)
		require.NoError(t, err)
		nulls := ""
		if len(args) > 0 {
			nulls = "(" + strings.TrimSuffix(strings.Repeat("NULL, ", len(args)), ", ") + ")"
		}
		require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE plan_scans"+nulls).Scan(&out))
		_, err = tx.Exec(ctx, "DEALLOCATE plan_scans")
		require.NoError(t, err)
	} else {
		require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&out))
	}
	type node struct {
		Type     string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Index    string `json:"Index Name"`
		Plans    []node `json:"Plans"`
	}
	var plans []struct{ Plan node }
	require.NoError(t, json.Unmarshal(out, &plans))
	var scans []scan
	var walk func(node)
	walk = func(n node) {
		if n.Relation != "" || n.Index != "" {
			scans = append(scans, scan{n.Type, n.Relation, n.Index})
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	require.NotEmpty(t, scans)
	return scans
}

// TestClaimFollowsPrimaryKeysWhenStatisticsLag plans the claim statement
// as Postgres keeps it for ingest's prepared statement: a generic plan,
// made while the claim table was small (a new install, the first minutes
// of traffic) and reused as the table grows, until autovacuum analyzes it.
// Looking up the claims a batch found already there, the business keys
// held before it and replayed bodies must go through their indexes: as
// joins they were planned as hash joins over the whole table, read for
// every batch.
func TestClaimFollowsPrimaryKeysWhenStatisticsLag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	for _, q := range []string{
		`INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, content_type)
SELECT 'stripe', 'evt_' || g, 'invoice.paid', 'processing', '{}', 'application/json' FROM generate_series(1, 700) g`,
		`INSERT INTO webhook_business_keys (route, key_hash, business_key, provider, event_id)
SELECT 'ship', sha256(convert_to(event_id, 'UTF8')), event_id, provider, event_id FROM webhook_event_claims`,
		`ANALYZE webhook_event_claims, webhook_business_keys`,
		`SET LOCAL plan_cache_mode = force_generic_plan`,
	} {
		_, err := tx.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	const batch = 60
	providers, ids, types, objects, statuses := make([]string, batch), make([]string, batch), make([]string, batch), make([]string, batch), make([]string, batch)
	payloads, contentTypes, lastErrors := make([][]byte, batch), make([]string, batch), make([]*string, batch)
	bodyHashes, encodings := make([][]byte, batch), make([]string, batch)
	routeOrd, routeNames, routeHashes := make([]int64, batch), make([]string, batch), make([][]byte, batch)
	routeKeys, routeMissing := make([]*string, batch), make([]*string, batch)
	routeWaits, routeAncestors := make([]string, batch), make([]string, batch)
	for i := range batch {
		// Every other event is one the table already holds.
		id := fmt.Sprintf("evt_%d", 10+i*10)
		if i%2 == 1 {
			id = fmt.Sprintf("evt_new_%d", i)
		}
		providers[i], ids[i], types[i], statuses[i] = "stripe", id, "invoice.paid", string(Processing)
		payloads[i], contentTypes[i] = []byte(`{}`), "application/json"
		key := id
		sum := sha256.Sum256([]byte(key))
		routeOrd[i], routeNames[i], routeHashes[i], routeKeys[i] = int64(i+1), "ship", sum[:], &key
		routeWaits[i], routeAncestors[i] = "[]", "[]"
	}
	scans := planScans(t, tx, claimManySQL, providers, ids, types, objects, statuses, payloads, contentTypes,
		lastErrors, bodyHashes, encodings, routeOrd, routeNames, routeHashes, routeKeys, routeMissing,
		routeWaits, routeAncestors, make([]string, batch))
	for _, sc := range scans {
		require.Falsef(t, sc.Type == "Seq Scan" && (sc.Relation == "webhook_event_claims" || sc.Relation == "webhook_business_keys"),
			"the claim statement scans %s: %v", sc.Relation, scans)
	}
	lateScans := planScans(t, tx, lateSQL, providers, ids, bodyHashes)
	for _, sc := range lateScans {
		require.Falsef(t, sc.Type == "Seq Scan" && sc.Relation == "webhook_event_claims", "lateSQL scans the claim table: %v", lateScans)
	}
}
