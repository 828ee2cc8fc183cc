package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const cellsProviders = `
providers:
  - {name: a, scheme: stripe, secrets_env: [K], cell: us}
  - {name: b, scheme: stripe, secrets_env: [K]}
routes:
  - {name: ra, provider: a, url: "https://a.example/x", events: ["*"]}
  - {name: rb, provider: b, url: "https://b.example/x", events: ["*"]}
`

// TestCellsDefault: without cells:, the one cell is DATABASE_URL under the
// name "default", every provider and route in it.
func TestCellsDefault(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(strings.ReplaceAll(cellsProviders, ", cell: us", "")))
	require.NoError(t, err)
	require.Equal(t, []Cell{{Name: DefaultCell, DatabaseURLEnv: "DATABASE_URL"}}, c.CellList())
	require.Equal(t, "default", c.ProviderCell("a"))
	require.Equal(t, "default", c.RouteCell("rb"))

	got, err := c.ResolveCells(func(k string) string { return map[string]string{"DATABASE_URL": "postgres://u:pw@db/x"}[k] })
	require.NoError(t, err)
	require.Equal(t, []CellURL{{Name: "default", URL: "postgres://u:pw@db/x", Key: "DATABASE_URL"}}, got)
	_, err = c.ResolveCells(func(string) string { return "" })
	require.EqualError(t, err, "DATABASE_URL is not set")
}

// TestCellsPinProviders: providers[].cell pins a provider; the others, and
// their routes, are in the first cell.
func TestCellsPinProviders(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
cells:
  - {name: eu, database_url_env: DB_EU}
  - {name: us, database_url_file: /run/secrets/db-us}
` + cellsProviders))
	require.NoError(t, err)
	require.Equal(t, "us", c.ProviderCell("a"))
	require.Equal(t, "eu", c.ProviderCell("b"))
	require.Equal(t, "us", c.RouteCell("ra"))
	require.Equal(t, "eu", c.RouteCell("rb"))
}

// TestCellsRefused: every malformed cells: entry, and a provider naming
// an unknown cell, is refused naming its key.
func TestCellsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, cells, want string }{
		{"unknown cell", "cells: [{name: eu, database_url_env: DB_EU}]",
			`providers[0].cell: "us" names no cell (cells: eu)`},
		{"no cells, a cell named", "",
			`providers[0].cell: "us" names no cell: without cells:, the one cell is "default" (DATABASE_URL)`},
		{"duplicate name", "cells: [{name: us, database_url_env: A}, {name: us, database_url_env: B}]",
			`cells[1].name: "us" is used by another cell`},
		{"bad name", "cells: [{name: US, database_url_env: A}]",
			`cells[0].name: "US" must be lower-case letters, digits, - or _`},
		{"no name", "cells: [{database_url_env: A}]", `cells[0].name: is required`},
		{"no URL", "cells: [{name: us}]", `cells[0]: one of database_url_env or database_url_file is required`},
		{"both", "cells: [{name: us, database_url_env: A, database_url_file: /f}]",
			`cells[0]: database_url_env and database_url_file are exclusive: set one`},
		{"bad env", "cells: [{name: us, database_url_env: 'A-B'}]",
			`cells[0].database_url_env: "A-B" is not a valid environment variable name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.cells + cellsProviders))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestResolveCells reads each cell's URL from its variable or file, and
// refuses a missing URL, one that does not parse, and two cells on one
// database, never quoting a URL (its password).
func TestResolveCells(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "db-us")
	require.NoError(t, os.WriteFile(file, []byte("postgres://u:s3cret@us.db:5433/hg\n"), 0o600))
	c, err := Parse([]byte(`
cells:
  - {name: eu, database_url_env: DB_EU}
  - {name: us, database_url_file: ` + file + `}
` + cellsProviders))
	require.NoError(t, err)
	resolve := func(eu string) ([]CellURL, error) {
		return c.ResolveCells(func(k string) string { return map[string]string{"DB_EU": eu}[k] })
	}

	got, err := resolve("postgres://u:s3cret@eu.db/hg")
	require.NoError(t, err)
	require.Equal(t, []CellURL{
		{Name: "eu", URL: "postgres://u:s3cret@eu.db/hg", Key: "cells[0].database_url_env (DB_EU)"},
		{Name: "us", URL: "postgres://u:s3cret@us.db:5433/hg", Key: "cells[1].database_url_file"},
	}, got)

	// Another database name on the same server is another database.
	_, err = resolve("postgres://u:s3cret@us.db:5433/other")
	require.NoError(t, err)

	for _, tc := range []struct{ name, eu, want string }{
		{"unset", "", "cells[0].database_url_env: environment variable DB_EU is not set or empty"},
		{"same database", "postgres://other:s3cret@us.db:5433/hg",
			"cells[1].database_url_file: names the same database as cells[0].database_url_env (DB_EU) (us.db:5433/hg): each cell needs a database of its own"},
		{"same database, one host of several", "postgres://u:s3cret@a.db:5432,us.db:5433/hg?target_session_attrs=read-write",
			"names the same database as cells[0].database_url_env (DB_EU) (us.db:5433/hg)"},
		{"unparsable", "postgres://u:s3cret@eu.db:notaport/hg",
			"cells[0].database_url_env (DB_EU): is not a valid PostgreSQL URL or connection string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(tc.eu)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}

	t.Run("file missing", func(t *testing.T) {
		c2 := *c
		c2.Cells = []Cell{{Name: "us", DatabaseURLFile: filepath.Join(dir, "nope")}}
		_, err := c2.ResolveCells(func(string) string { return "" })
		require.EqualError(t, err, "cells[0].database_url_file: cannot read "+filepath.Join(dir, "nope")+": no such file")
	})
}
