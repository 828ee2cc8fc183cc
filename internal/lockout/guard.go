package lockout

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// DefaultAddressFailures is how many failed sign-ins one client address
// may make a minute, whatever names or credentials it tries.
const DefaultAddressFailures = 20

// maxNameKey bounds the part of a name a Guard keeps.
const maxNameKey = 64

// DefaultClients is how many client addresses (and names from them) a
// Guard from NewGuard tracks at once, at about 150 bytes each: past that
// many failing at once, the oldest are forgotten (see Limiter), so a
// flood from many addresses costs memory only up to this bound and never
// refuses an address that did not fail itself.
const DefaultClients = 1 << 14

// Guard limits failed sign-ins per client address and, for a name, per
// name from that address. Nothing is counted per credential, nor per name
// alone: a guesser's failures lock out the guesser's address, never a right
// password or token sent from elsewhere, and a name that exists is counted
// exactly as one that does not (so the answers do not tell them apart).
//
// A distributed guesser is bounded by each of its addresses' limits; IPv6
// addresses count by their /64, which one client usually holds whole. An
// address with no failures of its own, a right credential from it is
// always checked, however many other addresses are failing.
type Guard struct {
	// Addresses counts failures per client address; its Failures should
	// be DefaultAddressFailures (NewGuard sets it).
	Addresses Limiter
	// Names counts failures per name from one address.
	Names Limiter
	// Proxies are the addresses whose X-Forwarded-For is believed: a
	// request from one of them is counted under the address it forwarded
	// for. Every other request is counted under its connection's address,
	// whatever it sends.
	Proxies []netip.Prefix
}

// NewGuard returns a Guard with the default limits that believes proxies.
func NewGuard(proxies []netip.Prefix) *Guard {
	return &Guard{
		Addresses: Limiter{Failures: DefaultAddressFailures, Names: DefaultClients},
		Names:     Limiter{Names: DefaultClients},
		Proxies:   proxies,
	}
}

// Client is the address r's failures count under.
func (g *Guard) Client(r *http.Request) string {
	addr, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return "(unknown address)"
	}
	if g.trusted(addr) {
		// The nearest hop that is not a trusted proxy is the client: every
		// entry left of it could have been written by the client itself.
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, ok := parseAddr(strings.TrimSpace(hops[i]))
			if !ok {
				break
			}
			addr = hop
			if !g.trusted(hop) {
				break
			}
		}
	}
	if addr.Is6() && !addr.Is4In6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.Unmap().String()
}

func (g *Guard) trusted(a netip.Addr) bool {
	for _, p := range g.Proxies {
		if p.Contains(a.Unmap()) || p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads "host:port" or a bare address.
func parseAddr(s string) (netip.Addr, bool) {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

func nameKey(client, name string) string {
	if len(name) > maxNameKey {
		name = name[:maxNameKey]
	}
	return client + "\x00" + name
}

// Wait returns how long client must wait before its next try with name
// ("" for a credential without one, such as a bearer token): zero when it
// may try now.
func (g *Guard) Wait(client, name string) time.Duration {
	wait := g.Addresses.Wait(client)
	if name != "" {
		wait = max(wait, g.Names.Wait(nameKey(client, name)))
	}
	return wait
}

// Fail records a failed try by client with name ("" for none). It reports
// whether client, or name from client, is now refused.
func (g *Guard) Fail(client, name string) (locked bool) {
	locked = g.Addresses.Fail(client)
	if name != "" && g.Names.Fail(nameKey(client, name)) {
		locked = true
	}
	return locked
}

// Succeed forgets name's failures from client. The address's failures
// stay: a client with a credential of its own must not clear its count
// between guesses at another's.
func (g *Guard) Succeed(client, name string) {
	if name != "" {
		g.Names.Succeed(nameKey(client, name))
	}
}
