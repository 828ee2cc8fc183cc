//go:build benchprofile

// Package benchprofile, built only with the benchprofile tag, gives a
// binary that imports it a CPU profile on signal for the benchmarks.
package benchprofile

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// With the benchprofile build tag (internal/bench builds ingest and the
// worker so), a binary that imports this package writes a CPU profile of
// the span between SIGUSR1 and SIGUSR2 to the file HOOKGATE_BENCH_CPUPROFILE
// names: first to that name plus ".tmp", renamed once complete, so that the
// benchmark can wait for the name. At SIGUSR2 it also writes the allocations
// since the process started (go tool pprof -sample_index=alloc_space) to
// that name plus ".allocs", before the rename. A binary built without the
// tag has no such hook.
func init() {
	path := os.Getenv("HOOKGATE_BENCH_CPUPROFILE")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(path + ".tmp"); err != nil {
					f = nil
					continue
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					_ = f.Close()
					f = nil
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				if a, err := os.Create(path + ".allocs"); err == nil {
					_ = pprof.Lookup("allocs").WriteTo(a, 0)
					_ = a.Close()
				}
				if err := f.Close(); err == nil {
					_ = os.Rename(path+".tmp", path)
				}
				f = nil
			}
		}
	}()
}
