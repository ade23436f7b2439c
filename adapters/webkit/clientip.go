package webkit

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// TrustedProxies are the reverse proxies (load balancers, a TLS proxy such as Caddy or nginx)
// whose X-Forwarded-For the service believes: CARDSHOP_TRUSTED_PROXIES. The zero value trusts
// none, and the client's address is then the peer's, whatever headers the request carries.
type TrustedProxies struct {
	nets []netip.Prefix
}

// ParseTrustedProxies reads a comma-separated list of IP addresses and CIDR prefixes (IPv4 or
// IPv6: "10.0.0.0/8, 192.168.1.7, fd00::/8"); empty trusts none. An entry that is neither is an
// error naming it.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var p TrustedProxies
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "/") {
			prefix, err := netip.ParsePrefix(entry)
			if err != nil {
				return TrustedProxies{}, fmt.Errorf("%q is not an IP address or a CIDR prefix such as 10.0.0.0/8", entry)
			}
			if prefix.Addr().Is4In6() { // ::ffff:10.0.0.0/104 is 10.0.0.0/8
				if prefix.Bits() < 96 {
					return TrustedProxies{}, fmt.Errorf("%q: an IPv4-mapped prefix needs at least 96 bits", entry)
				}
				prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
			}
			p.nets = append(p.nets, prefix.Masked())
			continue
		}
		addr, err := netip.ParseAddr(entry)
		if err != nil || addr.Zone() != "" {
			return TrustedProxies{}, fmt.Errorf("%q is not an IP address or a CIDR prefix such as 10.0.0.0/8", entry)
		}
		addr = addr.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return p, nil
}

// Empty reports whether no proxy is trusted.
func (p TrustedProxies) Empty() bool { return len(p.nets) == 0 }

func (p TrustedProxies) trusts(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the client's address of a request that came from peer with the X-Forwarded-For
// header values forwarded (each a comma-separated list, in the order the header lines came).
// An untrusted peer is the client, and the header is ignored. A trusted peer is a proxy that
// appended the address it received the request from: the list is walked from the right,
// skipping trusted addresses, and the first untrusted one is the client. Everything left of it
// was written by the client or by proxies the service cannot vouch for, so a client that sends
// its own X-Forwarded-For changes nothing. An entry that is not an address (no proxy of ours
// writes one) ends the walk: the last trusted address is then the client, as it is when every
// entry is trusted.
func (p TrustedProxies) ClientAddr(peer netip.Addr, forwarded []string) netip.Addr {
	client := peer.Unmap()
	if !p.trusts(client) {
		return client
	}
	for i := len(forwarded) - 1; i >= 0; i-- {
		entries := strings.Split(forwarded[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			hop, ok := parseHop(entries[j])
			if !ok {
				return client
			}
			client = hop
			if !p.trusts(hop) {
				return client
			}
		}
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a port ("1.2.3.4:5678",
// "[2001:db8::1]:443"), as some proxies write it.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

const trustedProxiesKey = "cardshop.trusted_proxies"

// ClientAddresses is the middleware that makes ClientIP read X-Forwarded-For through p; first
// on the app. With no trusted proxy it is not needed (ClientIP is then the peer's address).
func ClientAddresses(p TrustedProxies) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Locals(trustedProxiesKey, p)
		return c.Next()
	}
}

// ClientIP is the client's address of a request: the peer's, or, behind the proxies the app
// trusts (ClientAddresses), the one they forwarded (TrustedProxies.ClientAddr). Every per-IP
// limit, blocklist check, audit entry and log line of the service names the client by it.
func ClientIP(c *fiber.Ctx) string {
	p, ok := c.Locals(trustedProxiesKey).(TrustedProxies)
	if !ok || p.Empty() {
		return c.IP()
	}
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.IP()
	}
	var forwarded []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		forwarded = append(forwarded, string(v))
	}
	return p.ClientAddr(peer, forwarded).String()
}

// String lists the trusted addresses and prefixes, as ParseTrustedProxies reads them.
func (p TrustedProxies) String() string {
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		if n.Bits() == n.Addr().BitLen() {
			s[i] = n.Addr().String()
		} else {
			s[i] = n.String()
		}
	}
	return strings.Join(s, ",")
}
