package config

import (
	"cmp"
	"time"
)

// Read pool defaults and bounds (console.read_pool).
const (
	DefaultReadMaxConns         = 4
	DefaultReadStatementTimeout = 5 * time.Second
	DefaultReadWaitTimeout      = 2 * time.Second
	maxReadConns                = 50
	minReadStatementTimeout     = 100 * time.Millisecond
	maxReadStatementTimeout     = 10 * time.Minute
	maxReadWaitTimeout          = time.Minute
)

// ReadPool sizes and bounds the connections the operator API and the
// console read through: a pool of their own beside the worker's, so that
// however many people and scripts read, and however much, deliveries,
// completions and /readyz never wait for them. One per database.
type ReadPool struct {
	// MaxConns is how many reads run at once, per worker process. Default
	// 4; 1 to 50. Each is a Postgres connection beside the worker's pool.
	MaxConns int `yaml:"max_conns"`
	// StatementTimeout is the statement_timeout of each read: a read that
	// runs longer is cancelled and answered 503. Default 5s; 100ms to 10m.
	StatementTimeout Duration `yaml:"statement_timeout"`
	// WaitTimeout is how long a read waits for a free connection when
	// MaxConns are busy, before it is answered 503. Default 2s; at most 1m.
	WaitTimeout Duration `yaml:"wait_timeout"`
}

func (r *ReadPool) setDefaults() {
	r.MaxConns = cmp.Or(r.MaxConns, DefaultReadMaxConns)
	r.StatementTimeout = cmp.Or(r.StatementTimeout, Duration(DefaultReadStatementTimeout))
	r.WaitTimeout = cmp.Or(r.WaitTimeout, Duration(DefaultReadWaitTimeout))
}

func (v *validator) readPool(r ReadPool) {
	if r.MaxConns < 1 || r.MaxConns > maxReadConns {
		v.add("console.read_pool.max_conns", "must be from 1 to %d, got %d", maxReadConns, r.MaxConns)
	}
	if d := r.StatementTimeout.D(); d < minReadStatementTimeout || d > maxReadStatementTimeout {
		v.add("console.read_pool.statement_timeout", "must be from %s to %s, got %s", minReadStatementTimeout, maxReadStatementTimeout, d)
	}
	if d := r.WaitTimeout.D(); d <= 0 || d > maxReadWaitTimeout {
		v.add("console.read_pool.wait_timeout", "must be a positive duration of at most %s, got %s", maxReadWaitTimeout, d)
	}
}
