// Package cell holds the set of cells a binary serves: for each, its name,
// its pool, its River client and its claim store. A cell is one Postgres
// holding everything of the providers assigned to it; nothing crosses a
// cell, so every store operation stays a one-database operation, and only
// the choice of database is new. Each binary's wiring builds the set once
// from the configuration.
package cell

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// Pool is one cell's name and pool, before its River client and store.
type Pool struct {
	Name string
	Pool *pgxpool.Pool
}

// Cell is one cell as a binary holds it.
type Cell struct {
	Name string
	Pool *pgxpool.Pool
	// Jobs is the cell's River client: insert-only in ingest and in the
	// operator commands, the one that works the cell's jobs in the worker.
	Jobs *river.Client[pgx.Tx]
	// Store is the claim store over Pool, inserting its jobs with Jobs.
	Store *claim.Store
}

// Set is the cells a binary serves, in configuration order, and which of
// them holds each provider's and each route's rows. A reader across cells
// (All) sees each cell's name and store, in the same order everywhere.
type Set struct {
	cells    []*Cell
	byName   map[string]*Cell
	provider map[string]string
	route    map[string]string
}

// JobsFunc returns the River client for a cell's pool.
type JobsFunc func(p Pool) (*river.Client[pgx.Tx], error)

// New returns the set of pools, each with the River client jobs returns and
// a store over both. pools may be a subset of cfg's cells (worker --cells):
// the providers of the other cells then have none here.
func New(cfg *config.Config, pools []Pool, jobs JobsFunc, maxAttempts func(route string) int) (*Set, error) {
	if len(pools) == 0 {
		return nil, errors.New("no cell to serve")
	}
	s := &Set{byName: map[string]*Cell{}, provider: map[string]string{}, route: map[string]string{}}
	for _, p := range pools {
		if s.byName[p.Name] != nil {
			return nil, fmt.Errorf("cell %s is listed twice", p.Name)
		}
		client, err := jobs(p)
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", p.Name, err)
		}
		c := &Cell{Name: p.Name, Pool: p.Pool, Jobs: client, Store: claim.NewStore(p.Pool, client, maxAttempts)}
		s.cells = append(s.cells, c)
		s.byName[c.Name] = c
	}
	for _, p := range cfg.Providers {
		s.provider[p.Name] = cfg.ProviderCell(p.Name)
	}
	for _, r := range cfg.Routes {
		s.route[r.Name] = cfg.RouteCell(r.Name)
	}
	return s, nil
}

// All returns the cells in configuration order.
func (s *Set) All() []*Cell { return s.cells }

// First returns the first cell: where users, sessions and the operator
// views live.
func (s *Set) First() *Cell { return s.cells[0] }

// Named returns the cell called name, if the set holds it.
func (s *Set) Named(name string) (*Cell, bool) {
	c, ok := s.byName[name]
	return c, ok
}

// ForProvider returns the cell that holds provider's events, if the set
// holds it.
func (s *Set) ForProvider(provider string) (*Cell, bool) {
	return s.Named(s.provider[provider])
}

// ForRoute returns the cell that holds route's deliveries, breaker and
// pause (its provider's), if the set holds it.
func (s *Set) ForRoute(route string) (*Cell, bool) {
	return s.Named(s.route[route])
}

// Routes returns the names of the routes, of names, that cell holds, in
// the order given.
func (s *Set) Routes(cell string, names []string) []string {
	var out []string
	for _, r := range names {
		if s.route[r] == cell {
			out = append(out, r)
		}
	}
	return out
}

// Close closes every cell's pool.
func (s *Set) Close() {
	for _, c := range s.cells {
		c.Pool.Close()
	}
}
