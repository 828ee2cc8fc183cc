// Package dbtest gives tests a real, migrated PostgreSQL: a rolled-back
// transaction for most tests, and a database of their own, cloned from a
// migrated template, for tests that commit, LISTEN or start a River client.
//
// It finds a server through TEST_DATABASE_URL, else 127.0.0.1:5432 as user
// postgres, else starts a throwaway cluster with the installed binaries for
// the life of the test process. It never skips: without a server, tests fail
// and say how to get one.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hookgate/hookgate/internal/migrate"
	"github.com/hookgate/hookgate/internal/pgcluster"
	"github.com/hookgate/hookgate/migrations"
)

// defaultURL is the machine's shared server, tried when TEST_DATABASE_URL is unset.
const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLock serializes template creation across test processes, which
// `go test ./...` runs in parallel.
const templateLock int64 = 0x686f6f6b74706c // "hooktpl"

var (
	setupOnce sync.Once
	setupErr  error
	admin     string // URL of a maintenance database on the server
	template  string // name of the migrated template database
	cluster   *pgcluster.Cluster

	sharedOnce sync.Once
	sharedDB   *DB
	sharedErr  error
)

// Main runs the package's tests, stops a throwaway cluster if one was
// started, and then, if the tests passed, fails the run when a goroutine is
// left over: a leaked River client, pool, server or timer shows up here, in
// every package whose tests touch the database. Call it from TestMain; each
// cleanup runs after the tests and before the check, since Main exits the
// process and deferred calls in TestMain would never run.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if sharedDB != nil {
		sharedDB.drop()
	}
	if cluster != nil {
		_ = cluster.Remove(context.Background())
		_ = os.RemoveAll(filepath.Dir(cluster.Dir)) // made by startCluster
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests passed: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// AdminURL returns the URL of the server's maintenance database, for tests
// that create or inspect databases themselves.
func AdminURL(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup(context.Background()) })
	if setupErr != nil {
		t.Fatalf("no test PostgreSQL: %v\nSet TEST_DATABASE_URL, run a server on 127.0.0.1:5432 (user postgres, trust auth), or install the server binaries (apt-get install postgresql) so one can be started", setupErr)
	}
	return admin
}

// DB is a database of a test's own.
type DB struct {
	Name string
	URL  string
	Pool *pgxpool.Pool
}

// NewDB creates a fresh migrated database for t and drops it when t ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	AdminURL(t)
	db, err := create(context.Background())
	if err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(db.drop)
	return db
}

// NewEmptyDB creates a database with nothing in it, not even migrations,
// for tests of migrating; it is dropped when t ends. It returns its URL.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	AdminURL(t)
	name := "hookgate_empty_" + randomHex(8)
	if err := exec(context.Background(), admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating empty test database: %v", err)
	}
	t.Cleanup(func() {
		_ = exec(context.Background(), admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("creating empty test database: %v", err)
	}
	return u
}

// Tx returns a transaction in a migrated database shared by the package's
// tests; it is rolled back when t ends, so tests cannot see each other.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	AdminURL(t)
	sharedOnce.Do(func() { sharedDB, sharedErr = create(context.Background()) })
	if sharedErr != nil {
		t.Fatalf("creating shared test database: %v", sharedErr)
	}
	tx, err := sharedDB.Pool.Begin(context.Background())
	if err != nil {
		t.Fatalf("beginning test transaction: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func create(ctx context.Context) (*DB, error) {
	name := "hookgate_test_" + randomHex(8)
	if err := exec(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		return nil, err
	}
	u, err := withDatabase(admin, name)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	return &DB{Name: name, URL: u, Pool: pool}, nil
}

func (db *DB) drop() {
	db.Pool.Close()
	_ = exec(context.Background(), admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db.Name))
}

func setup(ctx context.Context) error {
	admin = os.Getenv("TEST_DATABASE_URL")
	switch {
	case admin != "":
		if err := ping(ctx, admin); err != nil {
			return fmt.Errorf("TEST_DATABASE_URL is set but unreachable: %w", err)
		}
	case ping(ctx, defaultURL) == nil:
		admin = defaultURL
	default:
		c, err := startCluster(ctx)
		if err != nil {
			return fmt.Errorf("nothing listens on 127.0.0.1:5432 and starting a throwaway cluster failed: %w", err)
		}
		cluster, admin = c, c.URL("postgres")
	}
	return ensureTemplate(ctx)
}

// NewCluster starts a throwaway cluster of t's own, for tests that stop,
// kill or freeze Postgres; never do that to a shared server. It is removed
// when t ends.
func NewCluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	c, err := startCluster(context.Background())
	if err != nil {
		t.Fatalf("starting a throwaway cluster: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Remove(context.Background())
		_ = os.RemoveAll(filepath.Dir(c.Dir))
	})
	return c
}

func startCluster(ctx context.Context) (*pgcluster.Cluster, error) {
	parent, err := os.MkdirTemp("", "hookgate-testpg-")
	if err != nil {
		return nil, err
	}
	// The server may run as another user (postgres, when we are root): it
	// needs to reach its data directory inside.
	if err := os.Chmod(parent, 0o755); err != nil {
		return nil, err
	}
	return pgcluster.Start(ctx, filepath.Join(parent, "data"), 0)
}

// ensureTemplate creates the migrated template database once per schema
// version. It is built under another name and renamed when complete, so a
// process killed halfway never leaves a half-migrated template behind.
func ensureTemplate(ctx context.Context) error {
	sum, err := schemaHash()
	if err != nil {
		return err
	}
	template = "hookgate_tmpl_" + sum
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", templateLock) //nolint:errcheck // released with the connection anyway
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", template).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	building := template + "_building"
	for _, q := range []string{
		fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building),
		fmt.Sprintf("CREATE DATABASE %s", building),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	u, err := withDatabase(admin, building)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	_, err = migrate.Up(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrating the template database: %w", err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, template))
	return err
}

// schemaHash names the template after everything that shapes the schema:
// our migration files and the River version that brings its own.
func schemaHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				h.Write([]byte(d.Version))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func exec(ctx context.Context, u, sql string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns url pointing at database name; url may be a URL or a
// keyword/value connection string.
func withDatabase(raw, name string) (string, error) {
	if !strings.Contains(raw, "://") {
		return raw + " dbname=" + name, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
