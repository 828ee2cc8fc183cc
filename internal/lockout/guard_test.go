package lockout_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/lockout"
)

// TestGuardClient: X-Forwarded-For is believed only from a trusted proxy,
// and then only up to the first hop that is not one (whatever a client
// writes to the left of it); IPv6 clients count by their /64.
func TestGuardClient(t *testing.T) {
	t.Parallel()
	g := lockout.NewGuard([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")})
	for _, tt := range []struct {
		name, remote, xff, want string
	}{
		{"Direct", "198.51.100.7:4000", "", "198.51.100.7"},
		{"UntrustedPeerForges", "198.51.100.7:4000", "203.0.113.1", "198.51.100.7"},
		{"TrustedProxy", "10.1.2.3:4000", "203.0.113.1", "203.0.113.1"},
		{"ChainOfProxies", "10.1.2.3:4000", "203.0.113.1, 192.0.2.1", "203.0.113.1"},
		{"ClientWritesLeftOfItself", "10.1.2.3:4000", "1.2.3.4, 203.0.113.1", "203.0.113.1"},
		{"GarbageHop", "10.1.2.3:4000", "not-an-ip", "10.1.2.3"},
		{"OnlyProxies", "10.1.2.3:4000", "10.9.9.9", "10.9.9.9"},
		{"IPv6ByPrefix", "[2001:db8:1:2:3:4:5:6]:4000", "", "2001:db8:1:2::/64"},
		{"Mapped", "[::ffff:198.51.100.7]:4000", "", "198.51.100.7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			require.Equal(t, tt.want, g.Client(r))
		})
	}
}

// TestGuardCountsPerClient: failures lock out their client, and a name
// from that client, never another client; a success forgets the name's
// failures but not the address's.
func TestGuardCountsPerClient(t *testing.T) {
	t.Parallel()
	g := lockout.NewGuard(nil)
	for range 5 {
		require.Zero(t, g.Wait("a", "alice"))
		g.Fail("a", "alice")
	}
	require.Positive(t, g.Wait("a", "alice"), "alice from a")
	require.Zero(t, g.Wait("b", "alice"), "alice from b")
	require.Zero(t, g.Wait("a", "bob"), "bob from a")
	require.Zero(t, g.Wait("a", ""), "a token from a")
	for i := range lockout.DefaultAddressFailures - 5 {
		g.Fail("a", "guess-"+string(rune('a'+i)))
	}
	require.Positive(t, g.Wait("a", ""), "a, whatever it tries, after 20 failures")
	require.Positive(t, g.Wait("a", "bob"))
	g.Succeed("a", "bob")
	require.Positive(t, g.Wait("a", "bob"), "a success does not clear the address's count")
	require.Zero(t, g.Wait("b", ""))
}

// TestGuardGroupsIPv6By64: the addresses of one /64 share a count (one
// client holds the prefix whole and could walk it), another /64 has its
// own.
func TestGuardGroupsIPv6By64(t *testing.T) {
	t.Parallel()
	g := lockout.NewGuard(nil)
	client := func(remote string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		return g.Client(r)
	}
	for i := range lockout.DefaultAddressFailures {
		g.Fail(client(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1)), "")
	}
	require.Positive(t, g.Wait(client("[2001:db8:1:2:ffff:ffff:ffff:ffff]:4000"), ""), "another address of the same /64")
	require.Zero(t, g.Wait(client("[2001:db8:1:3::1]:4000"), ""), "the next /64")
}

// TestGuardFloodFromManyAddresses: more failing addresses than the guard
// holds, each past its limit, never refuse an address that did not fail,
// for a name or for a token; the newest failing addresses stay refused.
func TestGuardFloodFromManyAddresses(t *testing.T) {
	t.Parallel()
	g := &lockout.Guard{
		Addresses: lockout.Limiter{Failures: lockout.DefaultAddressFailures, Names: 64},
		Names:     lockout.Limiter{Names: 64},
	}
	for i := range 200 {
		addr := fmt.Sprintf("127.0.%d.%d", i/250, i%250+1)
		for j := range lockout.DefaultAddressFailures {
			g.Fail(addr, fmt.Sprintf("name-%d", j%4))
		}
	}
	require.Zero(t, g.Wait("127.9.9.9", ""), "a token from a fresh address")
	require.Zero(t, g.Wait("127.9.9.9", "admin"), "a password from a fresh address")
	require.Positive(t, g.Wait("127.0.0.200", ""), "the newest flooder stays refused")
}
