package cli

import (
	"context"
	"errors"

	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readOnlySQLState is read_only_sql_transaction: a write on a standby, or on
// a primary that has been made read-only or demoted since the connection
// was made.
const readOnlySQLState = "25006"

// staleKey marks, in a connection's pgconn custom data, that it saw the
// server refuse a write; the pool then drops it instead of reusing it.
const staleKey = "hookgate.read_only"

// followPrimary makes a pool keep to whichever host accepts writes.
//
// pgx checks target_session_attrs only when it makes a connection, trying
// each host of a multi-host DATABASE_URL in turn; a connection made to the
// primary is never checked again. Once that primary turns read-only
// (demoted, or a standby promoted elsewhere while it came back as a
// standby) its pooled connections would fail every write for as long as
// they live. So every statement's error is looked at: a connection that
// hears 25006 is marked and destroyed when released (or before it is
// handed out again), and the next connection the pool makes goes through
// the hosts again. Connection errors need nothing: pgx closes the
// connection and the pool discards closed ones.
//
// With several hosts and no target_session_attrs, read-write is assumed:
// both binaries write, so a standby is of no use to them.
func followPrimary(cfg *pgxpool.Config, url string) {
	if len(cfg.ConnConfig.Fallbacks) > 0 && !strings.Contains(url, "target_session_attrs") {
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	cfg.ConnConfig.Tracer = readOnlyTracer{}
	cfg.AfterRelease = func(c *pgx.Conn) bool { return !stale(c) }
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) { return !stale(c), nil }
}

func stale(c *pgx.Conn) bool {
	marked, _ := c.PgConn().CustomData()[staleKey].(bool)
	return marked
}

// markIfReadOnly marks c stale when err says its server refuses writes.
func markIfReadOnly(c *pgx.Conn, err error) {
	var pgErr *pgconn.PgError
	if c != nil && errors.As(err, &pgErr) && pgErr.Code == readOnlySQLState {
		c.PgConn().CustomData()[staleKey] = true
	}
}

// readOnlyTracer watches every statement of a connection for 25006. It
// adds no work to a statement that succeeds.
type readOnlyTracer struct{}

func (readOnlyTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (readOnlyTracer) TraceQueryEnd(_ context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	markIfReadOnly(c, d.Err)
}

func (readOnlyTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (readOnlyTracer) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	markIfReadOnly(c, d.Err)
}

func (readOnlyTracer) TraceBatchEnd(_ context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	markIfReadOnly(c, d.Err)
}

func (readOnlyTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}

func (readOnlyTracer) TraceCopyFromEnd(_ context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	markIfReadOnly(c, d.Err)
}

// Writable is what both binaries' /readyz ask: whether the pool reaches a
// server that accepts writes. A bare ping would pass on a connection to a
// server turned read-only, where every claim would fail.
type Writable struct{ Pool *pgxpool.Pool }

// Ping fails unless a pooled connection answers and its server accepts
// writes; a connection to a read-only server is dropped on the way.
func (w Writable) Ping(ctx context.Context) error {
	conn, err := w.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var readOnly string
	if err := conn.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return err
	}
	if readOnly != "off" {
		conn.Conn().PgConn().CustomData()[staleKey] = true
		return errors.New("the database accepts no writes (a standby, or a primary being demoted)")
	}
	return nil
}

// hosts names the hosts of cfg for an error message, without credentials.
func hosts(cfg *pgconn.Config) string {
	names := []string{cfg.Host + ":" + strconv.Itoa(int(cfg.Port))}
	for _, f := range cfg.Fallbacks {
		n := f.Host + ":" + strconv.Itoa(int(f.Port))
		if n != names[len(names)-1] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}
