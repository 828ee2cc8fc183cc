//go:build benchprofile

package main

// The benchmarks' CPU profile on signal; see cmd/internal/benchprofile.
import _ "github.com/hookgate/hookgate/cmd/internal/benchprofile"
