package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/migrations"
)

// lockBound is the longest any session of the binaries may wait for a
// table lock, and the longest the migration may hold a lock that blocks
// reads or writes of a table, while the binaries run.
const lockBound = time.Second

// migrateTries is how many times the upgrade runs migrate, when a try ends
// in a lock timeout, before it fails: an operator runs it again, and a
// busy test machine can keep a transaction of the binaries open past the
// lock_timeout.
const migrateTries = 5

// upgradeRows is how many settled claims (each with a delivery) the tables
// hold before the upgrade: enough that building an index on either without
// CONCURRENTLY holds its lock for over lockBound.
const upgradeRows = 1_000_000

// TestUpgradeUnderLoad is a rolling upgrade: the previous release's ingest
// and worker run on the schema before the newest migration, with large
// tables and a steady load, while the newest migration is applied with this
// release's `worker migrate` (run again after a lock timeout, as operators
// do); then this release's ingest joins them. No
// request is refused, every event is delivered once, no session waits for a
// table lock longer than lockBound and the migration holds no blocking lock
// that long. A CREATE INDEX without CONCURRENTLY on a large table fails it;
// so does a column the running binaries do not fill (a NOT NULL without a
// default).
func TestUpgradeUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newest, previousRelease := newestMigration(t)
	old := buildRelease(t, previousRelease)

	url := dbtest.NewEmptyDB(t)
	migrateBefore(t, url, newest)
	fill(t, url, upgradeRows)

	s := newStack(t, []route{{name: "fulfil", events: []string{"order.paid"}}})
	s.setDatabase(url)
	oldIngest, _ := s.start("ingest", old.ingest), s.start("worker", old.worker)
	l := startLoad(t, oldIngest.url, 2)
	l.waitAcked(t, 30, 30*time.Second)

	locks := watchLocks(t, url)
	started := time.Now()
	// As docs/operations.md has operators run it: with a lock_timeout,
	// and again after a lock timeout, which a second run finishes.
	var out []byte
	for try := 1; ; try++ {
		migrate := exec.Command(bins.worker, "migrate")
		migrate.Env = append(os.Environ(), "DATABASE_URL="+url+"&application_name=hookgate-migrate&options=-c%20lock_timeout%3D500ms")
		var err error
		out, err = migrate.CombinedOutput()
		if err == nil {
			break
		}
		require.Contains(t, string(out), "lock timeout (SQLSTATE 55P03)", "%s\n%s", out, locks.migrationWait())
		require.Less(t, try, migrateTries, "every try ended in a lock timeout: %s\n%s", out, locks.migrationWait())
		t.Logf("migrate ended in a lock timeout (try %d), so it runs again; %s", try, locks.migrationWait())
	}
	require.Contains(t, string(out), fmt.Sprintf("hookgate migrations [%d]", newest), "only the newest migration was pending")
	l.waitAckedAfter(t, started, 30, 60*time.Second)

	// This release's ingest beside the previous release's worker.
	newIngest := s.ingest()
	l2 := startLoad(t, newIngest.url, 1)
	l2.waitAcked(t, 20, 30*time.Second)
	acked := append(l.stop(t), l2.stop(t)...)
	waited, held := locks.stop()

	t.Logf("upgrade: migration %d took %s on %d rows; longest lock wait %s, longest blocking lock held by the migration %s; %d events",
		newest, time.Since(started).Round(time.Millisecond), upgradeRows, waited.Round(time.Millisecond), held.Round(time.Millisecond), len(acked))
	t.Log(locks.migrationWait())
	require.Zero(t, l.refused()+l2.refused(), "no request refused during the upgrade")
	require.Less(t, waited, lockBound, "no session waited for a table lock longer than %s", lockBound)
	require.Less(t, held, lockBound, "the migration held no blocking lock longer than %s", lockBound)

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE event_id LIKE 'evt_%' AND status <> 'completed'`).Scan(&n)
		return err == nil && n == 0
	}, 60*time.Second, 100*time.Millisecond, "every event is delivered")
	for _, id := range acked {
		require.Equal(t, 1, s.down.effectsOf(key(id, "fulfil")), "one effect for %s", id)
	}
}

// setDatabase points the stack's binaries at url.
func (s *stack) setDatabase(url string) {
	for i, kv := range s.env {
		if strings.HasPrefix(kv, "DATABASE_URL=") {
			s.env[i] = "DATABASE_URL=" + url
		}
	}
}

// newestMigration returns the newest migration's version and the commit
// before the one that added it: the previous release, as far as the schema
// goes.
func newestMigration(t *testing.T) (version int64, previous string) {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	slices.Sort(files) // zero-padded numbers sort as they apply
	last := files[len(files)-1]
	version, err = goose.NumericComponent(last)
	require.NoError(t, err)
	out, err := exec.Command("git", "log", "--no-renames", "--diff-filter=A", "--format=%H", "-1", "--",
		filepath.Join("..", "..", "migrations", last)).Output()
	require.NoError(t, err, "the upgrade test builds the previous release from git history, so it needs the repository's history")
	added := strings.TrimSpace(string(out))
	require.NotEmpty(t, added, "%s is not committed yet: commit it, then run the upgrade test", last)
	return version, added + "^"
}

// buildRelease builds ingest and worker as they were at rev.
func buildRelease(t *testing.T, rev string) struct{ ingest, worker string } {
	t.Helper()
	src, dir := t.TempDir(), t.TempDir()
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, src)
	archive.Dir = filepath.Join("..", "..")
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "extracting %s: %s", rev, out)
	b := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/ingest", "./cmd/worker")
	b.Dir = src
	out, err = b.CombinedOutput()
	require.NoError(t, err, "building %s: %s", rev, out)
	return struct{ ingest, worker string }{filepath.Join(dir, "ingest"), filepath.Join(dir, "worker")}
}

// migrateBefore applies River's migrations and hookgate's up to, not
// including, version.
func migrateBefore(t *testing.T, url string, version int64) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, version-1)
	require.NoError(t, err)
}

// fill adds n settled claims, each with a completed delivery, as months of
// traffic leave behind; their ids are in no particular order, as providers'
// are.
func fill(t *testing.T, url string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
INSERT INTO webhook_event_claims (provider, event_id, event_type, status, payload, completed_at)
SELECT 'sw', 'old_' || md5(g::text), 'order.paid', 'completed', '\x7b7d', now() FROM generate_series(1, $1) g`, n)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `
INSERT INTO webhook_deliveries (provider, event_id, route, status, completed_at)
SELECT 'sw', 'old_' || md5(g::text), 'fulfil', 'completed', now() FROM generate_series(1, $1) g`, n)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `ANALYZE webhook_event_claims, webhook_deliveries`)
	require.NoError(t, err)
}

// lockWatch samples the database's locks until stopped.
type lockWatch struct {
	stop func() (waited, held time.Duration)
	// migrationWait says what the migration waited longest for, and behind
	// whom: a failed migration names what held it up.
	migrationWait func() string
}

// watchLocks samples pg_stat_activity and pg_locks every 10 ms: the longest
// any session but the migration's has been waiting for a table lock (since
// the wait began, pg_locks.waitstart: its statement may have run a while
// before; the migration's own waits are bounded by its lock_timeout, and
// hold up others only through the locks it holds, timed next), and the
// longest the migration (application_name hookgate-migrate) has held a
// lock that blocks writes or reads of a table (SHARE and stronger). It also
// keeps the migration's longest wait, with the sessions blocking it.
func watchLocks(t *testing.T, url string) lockWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	var (
		mu           sync.Mutex
		waited, held time.Duration
		ownWait      float64
		ownWaitSeen  string
		wg           sync.WaitGroup
	)
	since := map[string]time.Time{} // pid/relation/mode → first seen
	wg.Go(func() {
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			var w float64
			if err := conn.QueryRow(ctx, `
SELECT coalesce(max(extract(epoch FROM now() - l.waitstart)), 0)
FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted AND l.locktype = 'relation'
WHERE a.datname = current_database() AND a.application_name <> 'hookgate-migrate'`).Scan(&w); err != nil {
				continue
			}
			var mw float64
			var mwSeen string
			if err := conn.QueryRow(ctx, `
SELECT coalesce(extract(epoch FROM now() - l.waitstart), 0),
       l.relation::regclass || ' ' || l.mode || ' behind: ' || coalesce((
           SELECT string_agg(format('pid %s (%s, %s, %s, transaction %s ms): %s', b.pid, b.backend_type,
                      coalesce(nullif(b.application_name, ''), '-'), b.state,
                      round(extract(epoch FROM now() - b.xact_start) * 1000), left(b.query, 120)), '; ')
           FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))), 'nobody')
FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted AND l.locktype = 'relation'
WHERE a.datname = current_database() AND a.application_name = 'hookgate-migrate'
ORDER BY 1 DESC LIMIT 1`).Scan(&mw, &mwSeen); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			rows, err := conn.Query(ctx, `
SELECT l.pid || '/' || l.relation || '/' || l.mode
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.datname = current_database() AND a.application_name = 'hookgate-migrate' AND l.granted
  AND l.locktype = 'relation' AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')`)
			if err != nil {
				continue
			}
			now := time.Now()
			seen, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			mu.Lock()
			waited = max(waited, time.Duration(w*float64(time.Second)))
			if mw > ownWait {
				ownWait, ownWaitSeen = mw, mwSeen
			}
			for _, k := range seen {
				if _, ok := since[k]; !ok {
					since[k] = now
				}
				held = max(held, now.Sub(since[k]))
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})
	var once sync.Once
	stop := func() (time.Duration, time.Duration) {
		once.Do(func() { cancel(); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return waited, held
	}
	t.Cleanup(func() { stop() })
	return lockWatch{stop: stop, migrationWait: func() string {
		mu.Lock()
		defer mu.Unlock()
		if ownWaitSeen == "" {
			return "the migration waited for no table lock"
		}
		return fmt.Sprintf("the migration's longest lock wait seen: %.0f ms for %s", ownWait*1000, ownWaitSeen)
	}}
}
