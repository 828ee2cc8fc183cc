// Package devlocal is the local system devtool's commands share: child
// processes with their output prefixed on one console, the Postgres kept in
// .local/pg, throwaway databases, and the demo event.
package devlocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

const (
	// Dir holds what devtool makes (binaries, the Postgres cluster); it
	// is gitignored.
	Dir = ".local"
	// PGDir is the data directory of devtool's Postgres, kept between runs.
	PGDir = Dir + "/pg"
	// PGPort is the port of devtool's Postgres, fixed so that DATABASE_URL
	// stays the same from run to run.
	PGPort = 54329
	// HealthTimeout bounds the wait for each process's /healthz.
	HealthTimeout = time.Minute
)

// NewFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting, so that run stays testable.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("devtool "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: devtool %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// CheckExecutable reports a missing binary with how to build it.
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not built (no executable at %s); build the binaries first: go build -o %s/ ./cmd/ingest ./cmd/worker ./cmd/devtool (make run does this)",
			filepath.Base(path), path, filepath.Dir(path))
	}
	return nil
}

// CheckFree reports whether addr can be listened on, by doing so briefly.
func CheckFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// FreeLoopback returns a loopback address nothing listens on now, or "".
func FreeLoopback() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitHealthy polls url until it answers 200, failing early when a child
// exits or ctx ends.
func WaitHealthy(ctx context.Context, sup *Supervisor, name, url string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(HealthTimeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("checking %s: %w", name, err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s with 200 within %s", name, url, HealthTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-sup.exited:
			return fmt.Errorf("%s exited while starting (%s; its output is above)", p.name, p.ExitText())
		case <-tick.C:
		}
	}
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
