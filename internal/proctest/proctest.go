// Package proctest helps tests run our servers, in-process or as binaries:
// a free loopback address, a wait for /healthz, and an output buffer that
// a running process may write while the test reads it.
package proctest

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FreeAddr returns a loopback address with a port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitHealthy polls GET url until it answers 200, for at most 30 seconds.
// It fails t at once when exited yields, i.e. the server stopped first;
// exited may be nil.
func WaitHealthy(t testing.TB, url string, exited <-chan error) {
	t.Helper()
	var exitErr error
	exitedEarly := false
	require.Eventually(t, func() bool {
		select {
		case exitErr = <-exited:
			exitedEarly = true
			return true
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "%s did not become healthy within 30s", url)
	if exitedEarly {
		t.Fatalf("%s: server exited before becoming healthy: %v", url, exitErr)
	}
}

// Buffer is a bytes.Buffer safe for one writer and concurrent readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
