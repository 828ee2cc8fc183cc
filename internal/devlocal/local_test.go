package devlocal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckExecutable(t *testing.T) {
	t.Parallel()

	err := CheckExecutable(t.TempDir() + "/worker")
	require.ErrorContains(t, err, "worker is not built")
	require.ErrorContains(t, err, "go build -o ")
	require.NoError(t, CheckExecutable("/bin/sh"))
}
