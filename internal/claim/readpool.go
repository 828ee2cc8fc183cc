package claim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrReadTimeout is what a read through a ReadPool wraps when it ran past
// the pool's statement timeout, or waited past its wait timeout for a
// connection; the error is a *ReadTimeoutError.
var ErrReadTimeout = errors.New("read timed out")

// ReadTimeoutError says which bound a read through a ReadPool ran into.
type ReadTimeoutError struct {
	// Waiting is true when no connection came free within Limit, false
	// when the statement ran longer than Limit.
	Waiting bool
	Limit   time.Duration
}

func (e *ReadTimeoutError) Error() string {
	if e.Waiting {
		return fmt.Sprintf("%v: no read connection came free within %s", ErrReadTimeout, e.Limit)
	}
	return fmt.Sprintf("%v: the statement ran past its timeout of %s", ErrReadTimeout, e.Limit)
}

// Unwrap makes errors.Is(err, ErrReadTimeout) hold.
func (e *ReadTimeoutError) Unwrap() error { return ErrReadTimeout }

// ReadLimits bound a ReadPool.
type ReadLimits struct {
	// MaxConns is how many statements the pool runs at once.
	MaxConns int32
	// StatementTimeout is the statement_timeout of every connection.
	StatementTimeout time.Duration
	// WaitTimeout bounds how long a read waits for a free connection.
	WaitTimeout time.Duration
}

// queryCanceled is Postgres' query_canceled: a statement ended by its
// statement_timeout, or by a cancel request.
const queryCanceled = "57014"

// ReadPool is a small pool of its own for reads that people and scripts
// ask for (the operator API and the console), so that however many of them
// arrive and however long they would run, they never hold the connections
// that deliveries, completions and health checks use: at most MaxConns run
// at once, each for at most StatementTimeout, and a read waits at most
// WaitTimeout for a connection. Past either bound the read fails with a
// *ReadTimeoutError. It is a DB, so a Store over it reads as any other;
// one is opened per database (OpenReadPool).
type ReadPool struct {
	pool   *pgxpool.Pool
	limits ReadLimits
}

// OpenReadPool opens a ReadPool with l over cfg, a pool configuration
// parsed from the database's URL (its MaxConns and statement_timeout are
// l's). A read whose context ends is cancelled on the server, which keeps
// the connection, rather than by closing the connection, which would leave
// the statement running on the server while the pool opens another. It
// does not connect before the first read.
func OpenReadPool(cfg *pgxpool.Config, l ReadLimits) (*ReadPool, error) {
	cfg.MaxConns = l.MaxConns
	cfg.MinConns = 0
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(l.StatementTimeout.Milliseconds(), 10)
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the read pool: %w", err)
	}
	return &ReadPool{pool: pool, limits: l}, nil
}

// Close closes the pool's connections.
func (p *ReadPool) Close() { p.pool.Close() }

// acquire waits at most the wait timeout for a connection.
func (p *ReadPool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, p.limits.WaitTimeout)
	defer cancel()
	c, err := p.pool.Acquire(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return nil, &ReadTimeoutError{Waiting: true, Limit: p.limits.WaitTimeout}
	}
	return c, err
}

// timedOut returns err, or a *ReadTimeoutError when it is the server
// ending a statement that ctx did not end: its statement_timeout.
func (p *ReadPool) timedOut(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == queryCanceled {
		return &ReadTimeoutError{Limit: p.limits.StatementTimeout}
	}
	return err
}

// Query implements DB.
func (p *ReadPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, p.timedOut(ctx, err)
	}
	return &readRows{Rows: rows, ctx: ctx, p: p, conn: c}, nil
}

// QueryRow implements DB.
func (p *ReadPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &readRow{row: c.QueryRow(ctx, sql, args...), ctx: ctx, p: p, conn: c}
}

// Exec implements DB.
func (p *ReadPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	tag, err := c.Exec(ctx, sql, args...)
	return tag, p.timedOut(ctx, err)
}

// Begin implements DB: the transaction holds its connection until it ends.
func (p *ReadPool) Begin(ctx context.Context) (pgx.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		c.Release()
		return nil, p.timedOut(ctx, err)
	}
	return &readTx{Tx: tx, conn: c}, nil
}

// SendBatch implements DB: the batch holds its connection until closed,
// and so may not begin a transaction that outlives it.
func (p *ReadPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, err := p.acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	return &readBatch{BatchResults: c.SendBatch(ctx, b), ctx: ctx, p: p, conn: c}
}

// readRows gives its connection back once read or closed.
type readRows struct {
	pgx.Rows
	ctx  context.Context
	p    *ReadPool
	conn *pgxpool.Conn
}

func (r *readRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release()
	return false
}

func (r *readRows) Close() {
	r.Rows.Close()
	r.release()
}

func (r *readRows) Err() error { return r.p.timedOut(r.ctx, r.Rows.Err()) }

func (r *readRows) release() {
	if r.conn != nil {
		r.conn.Release()
		r.conn = nil
	}
}

// readRow gives its connection back once scanned.
type readRow struct {
	row  pgx.Row
	ctx  context.Context
	p    *ReadPool
	conn *pgxpool.Conn
}

func (r *readRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	r.conn.Release()
	return r.p.timedOut(r.ctx, err)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// readTx gives its connection back when it ends.
type readTx struct {
	pgx.Tx
	conn *pgxpool.Conn
}

func (t *readTx) Commit(ctx context.Context) error {
	defer t.conn.Release()
	return t.Tx.Commit(ctx)
}

func (t *readTx) Rollback(ctx context.Context) error {
	defer t.conn.Release()
	return t.Tx.Rollback(ctx)
}

// readBatch gives its connection back when closed.
type readBatch struct {
	pgx.BatchResults
	ctx  context.Context
	p    *ReadPool
	conn *pgxpool.Conn
}

func (b *readBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.p.timedOut(b.ctx, err)
}

func (b *readBatch) Close() error {
	defer b.conn.Release()
	return b.p.timedOut(b.ctx, b.BatchResults.Close())
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
