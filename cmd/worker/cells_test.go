package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
)

// TestServedCells: --cells picks cells in configuration order, all of them
// without it, and refuses a name that is no cell.
func TestServedCells(t *testing.T) {
	t.Parallel()
	pools := []cli.CellPool{{Name: "eu"}, {Name: "us"}, {Name: "ap"}}
	names := func(ps []cli.CellPool) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	got, err := servedCells(pools, "")
	require.NoError(t, err)
	require.Equal(t, []string{"eu", "us", "ap"}, names(got))
	got, err = servedCells(pools, "ap, eu")
	require.NoError(t, err)
	require.Equal(t, []string{"eu", "ap"}, names(got), "in configuration order")
	_, err = servedCells(pools, "eu,mars")
	require.EqualError(t, err, `--cells: "mars" is not a cell of the configuration (cells: eu, us, ap)`)

	err = run(context.Background(), []string{"worker", "--cells", "eu", "claims", "list"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "--cells applies only when serving, not to claims")
}
