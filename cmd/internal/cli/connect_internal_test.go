package cli

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// TestConnectToASilentHostEnds: a database host that accepts the
// connection and never answers (a hung or black-holed server) costs a
// connection attempt DefaultConnectTimeout, not the system's TCP timeout;
// a URL's own connect_timeout wins.
func TestConnectToASilentHostEnds(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	url := "postgres://postgres@" + silent.Addr().String() + "/postgres?sslmode=disable"

	cfg, err := poolConfig(url, "DATABASE_URL")
	require.NoError(t, err)
	require.Equal(t, DefaultConnectTimeout, cfg.ConnConfig.ConnectTimeout)
	cfg, err = poolConfig(url+"&connect_timeout=1", "DATABASE_URL")
	require.NoError(t, err)
	require.Equal(t, time.Second, cfg.ConnConfig.ConnectTimeout, "the URL's own")

	// A context with no deadline of its own: the bound is the pool's.
	pool, err := newPool(context.Background(), config.CellURL{Name: "c", URL: url, Key: "DATABASE_URL"})
	require.NoError(t, err)
	defer pool.Close()
	done := make(chan error, 1)
	go func() { done <- pool.Ping(context.Background()) }()
	select {
	case err := <-done:
		require.Error(t, err, "a host that never answers")
	case <-time.After(time.Minute):
		t.Fatal("connecting to a host that never answers did not end within a minute")
	}
}
