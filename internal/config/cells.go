package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultCell is the name of the one cell when the configuration lists
// none: the database DATABASE_URL names, as before cells existed.
const DefaultCell = "default"

// databaseURLEnv is the variable the one cell's URL is read from when the
// configuration lists no cells.
const databaseURLEnv = "DATABASE_URL"

// Cell is one Postgres (with its standbys) holding everything of the
// providers assigned to it: their claims, deliveries, jobs and breakers.
// Nothing crosses a cell.
type Cell struct {
	// Name appears in provider settings, metric labels, logs and
	// worker --cells: lower-case letters, digits, - and _.
	Name string `yaml:"name"`
	// DatabaseURLEnv names the environment variable holding the cell's
	// PostgreSQL URL.
	DatabaseURLEnv string `yaml:"database_url_env"`
	// DatabaseURLFile names a file holding it instead (a mounted secret);
	// surrounding white space is not part of the URL.
	DatabaseURLFile string `yaml:"database_url_file"`
}

// CellList returns the cells in configuration order: those listed under
// cells:, or else the one cell DefaultCell, whose URL is DATABASE_URL.
func (c *Config) CellList() []Cell {
	if len(c.Cells) > 0 {
		return c.Cells
	}
	return []Cell{{Name: DefaultCell, DatabaseURLEnv: databaseURLEnv}}
}

// ProviderCell returns the name of the cell that holds provider name's
// events: its cell setting, else the first cell.
func (c *Config) ProviderCell(name string) string {
	if p, ok := c.Provider(name); ok && p.Cell != "" {
		return p.Cell
	}
	return c.CellList()[0].Name
}

// RouteCell returns the name of the cell that holds route name's
// deliveries, breaker and pause: its provider's.
func (c *Config) RouteCell(name string) string {
	r, _ := c.Route(name)
	return c.ProviderCell(r.Provider)
}

// validateCells checks cells: and every provider's cell against it.
func (c *Config) validateCells(v *validator) {
	names := map[string]bool{}
	for i, cell := range c.Cells {
		key := fmt.Sprintf("cells[%d]", i)
		switch {
		case cell.Name == "":
			v.add(key+".name", "is required")
		case !nameRE.MatchString(cell.Name):
			v.add(key+".name", "%q must be lower-case letters, digits, - or _ (at most 63), starting with a letter or digit", cell.Name)
		case names[cell.Name]:
			v.add(key+".name", "%q is used by another cell", cell.Name)
		}
		names[cell.Name] = true
		switch {
		case cell.DatabaseURLEnv == "" && cell.DatabaseURLFile == "":
			v.add(key, "one of database_url_env or database_url_file is required")
		case cell.DatabaseURLEnv != "" && cell.DatabaseURLFile != "":
			v.add(key, "database_url_env and database_url_file are exclusive: set one")
		case cell.DatabaseURLEnv != "" && !envRE.MatchString(cell.DatabaseURLEnv):
			v.add(key+".database_url_env", "%q is not a valid environment variable name", cell.DatabaseURLEnv)
		case cell.DatabaseURLFile != "":
			v.filePath(key+".database_url_file", cell.DatabaseURLFile)
		}
	}
	for i, p := range c.Providers {
		if p.Cell == "" {
			continue
		}
		key := fmt.Sprintf("providers[%d].cell", i)
		switch {
		case len(c.Cells) == 0 && p.Cell != DefaultCell:
			v.add(key, "%q names no cell: without cells:, the one cell is %q (DATABASE_URL)", p.Cell, DefaultCell)
		case len(c.Cells) > 0 && !names[p.Cell]:
			v.add(key, "%q names no cell (cells: %s)", p.Cell, strings.Join(c.cellNames(), ", "))
		}
	}
}

func (c *Config) cellNames() []string {
	var out []string
	for _, cell := range c.CellList() {
		out = append(out, cell.Name)
	}
	return out
}

// CellURL is a cell with its database URL read. The URL holds a password:
// it is never logged or printed.
type CellURL struct {
	Name string
	URL  string
	// Key names where the URL came from, for messages: "DATABASE_URL" or
	// "cells[1].database_url_env (HOOKGATE_DB_US)".
	Key string
}

// ResolveCells reads each cell's database URL, in configuration order.
// A URL that is missing or does not parse is an error naming its key; two
// cells whose URLs name the same database (a host and port in common, and
// the same database name) are refused, since their providers would then
// share one failure domain and one set of tables. No message quotes a URL.
func (c *Config) ResolveCells(getenv func(string) string) ([]CellURL, error) {
	if len(c.Cells) == 0 {
		url := getenv(databaseURLEnv)
		if url == "" {
			return nil, errors.New("DATABASE_URL is not set")
		}
		return []CellURL{{Name: DefaultCell, URL: url, Key: databaseURLEnv}}, nil
	}
	var v validator
	var out []CellURL
	for i, cell := range c.Cells {
		key := fmt.Sprintf("cells[%d].database_url_env", i)
		var url string
		if cell.DatabaseURLFile != "" {
			key = fmt.Sprintf("cells[%d].database_url_file", i)
			b, err := os.ReadFile(cell.DatabaseURLFile)
			if err != nil {
				v.add(key, "cannot read %s: %s", cell.DatabaseURLFile, fileProblem(err))
				continue
			}
			if url = strings.TrimSpace(string(b)); url == "" {
				v.add(key, "%s is empty", cell.DatabaseURLFile)
				continue
			}
		} else if url = getenv(cell.DatabaseURLEnv); url == "" {
			v.add(key, "environment variable %s is not set or empty", cell.DatabaseURLEnv)
			continue
		}
		if cell.DatabaseURLEnv != "" {
			key += " (" + cell.DatabaseURLEnv + ")"
		}
		out = append(out, CellURL{Name: cell.Name, URL: url, Key: key})
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return out, sameDatabase(out)
}

// sameDatabase refuses two cells that name one database.
func sameDatabase(cells []CellURL) error {
	var v validator
	dbs := make([][]string, len(cells))
	for i, cell := range cells {
		cfg, err := pgconn.ParseConfig(cell.URL)
		if err != nil {
			// pgconn's message would quote the URL, password and all.
			v.add(cell.Key, "is not a valid PostgreSQL URL or connection string")
			continue
		}
		dbs[i] = databases(cfg)
	}
	for i := range cells {
		for j := range i {
			if dbs[i] == nil || dbs[j] == nil {
				continue
			}
			if k := slices.IndexFunc(dbs[i], func(d string) bool { return slices.Contains(dbs[j], d) }); k >= 0 {
				v.add(cells[i].Key, "names the same database as %s (%s): each cell needs a database of its own",
					cells[j].Key, dbs[i][k])
			}
		}
	}
	return v.err()
}

// databases lists cfg's hosts as host:port/dbname, without credentials.
func databases(cfg *pgconn.Config) []string {
	name := func(host string, port uint16) string {
		return host + ":" + strconv.Itoa(int(port)) + "/" + cfg.Database
	}
	out := []string{name(cfg.Host, cfg.Port)}
	for _, f := range cfg.Fallbacks {
		out = append(out, name(f.Host, f.Port))
	}
	return out
}

func fileProblem(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "no such file"
	}
	if errors.Is(err, os.ErrPermission) {
		return "permission denied"
	}
	return "read error"
}
