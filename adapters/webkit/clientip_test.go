package webkit_test

import (
	"io"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
)

func proxies(t *testing.T, s string) webkit.TrustedProxies {
	t.Helper()
	p, err := webkit.ParseTrustedProxies(s)
	if err != nil {
		t.Fatalf("ParseTrustedProxies(%q): %v", s, err)
	}
	return p
}

// The client's address behind trusted proxies: X-Forwarded-For walked from the right, trusted
// hops skipped, the first untrusted one is the client; whatever a client writes left of it
// (or sends from an untrusted peer) changes nothing.
func TestClientAddr(t *testing.T) {
	lb := proxies(t, "10.0.0.0/8, 192.168.1.7, fd00::/8, 2001:db8::53")
	for _, c := range []struct {
		name, peer string
		forwarded  []string
		want       string
	}{
		{"no proxy: the peer", "203.0.113.9", nil, "203.0.113.9"},
		{"an untrusted peer's header is ignored", "203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9"},
		{"an untrusted peer cannot claim a trusted address", "203.0.113.9", []string{"10.0.0.1"}, "203.0.113.9"},
		{"one proxy", "10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a single address trusted", "192.168.1.7", []string{"198.51.100.1"}, "198.51.100.1"},
		{"the next address is not trusted", "192.168.1.8", []string{"198.51.100.1"}, "192.168.1.8"},
		{"a chain of proxies", "10.0.0.1", []string{"198.51.100.1, 10.0.0.9, 192.168.1.7"}, "198.51.100.1"},
		{"a spoofed entry left of the client", "10.0.0.1", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"a spoofed trusted address left of the client", "10.0.0.1", []string{"10.9.9.9, 198.51.100.1"}, "198.51.100.1"},
		{"spoofed entries in a header line of their own", "10.0.0.1", []string{"1.1.1.1", "198.51.100.1"}, "198.51.100.1"},
		{"a chain over several header lines", "10.0.0.1", []string{"198.51.100.1, 10.0.0.8", "10.0.0.9"}, "198.51.100.1"},
		{"no header from a trusted peer: the peer", "10.0.0.1", nil, "10.0.0.1"},
		{"an empty header: the peer", "10.0.0.1", []string{""}, "10.0.0.1"},
		{"only trusted hops: the furthest", "10.0.0.1", []string{"10.0.0.7, 10.0.0.8"}, "10.0.0.7"},
		{"garbage ends the walk at the last trusted hop", "10.0.0.1", []string{"198.51.100.1, not-an-ip, 10.0.0.8"}, "10.0.0.8"},
		{"garbage as the client's own entry", "10.0.0.1", []string{"<script>"}, "10.0.0.1"},
		{"an entry with a port", "10.0.0.1", []string{"198.51.100.1:4711"}, "198.51.100.1"},
		{"IPv6 client behind an IPv6 proxy", "fd00::1", []string{"2001:db8::1"}, "2001:db8::1"},
		{"IPv6 entry with a port", "fd00::1", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"IPv4 client behind an IPv6 proxy", "2001:db8::53", []string{"198.51.100.1"}, "198.51.100.1"},
		{"an IPv4-mapped peer is the IPv4 address", "::ffff:10.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"an IPv4-mapped client entry", "10.0.0.1", []string{"::ffff:198.51.100.1"}, "198.51.100.1"},
		{"an untrusted IPv6 peer", "2001:db8::99", []string{"198.51.100.1"}, "2001:db8::99"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := lb.ClientAddr(netip.MustParseAddr(c.peer), c.forwarded)
			if got.String() != c.want {
				t.Fatalf("peer %s, X-Forwarded-For %q: client %s, want %s", c.peer, c.forwarded, got, c.want)
			}
		})
	}
	// No trusted proxy (the default): always the peer.
	none := proxies(t, "")
	if got := none.ClientAddr(netip.MustParseAddr("10.0.0.1"), []string{"198.51.100.1"}); got.String() != "10.0.0.1" {
		t.Fatalf("no trusted proxy: client %s, want the peer", got)
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "",
		" , ":                                 "",
		"10.0.0.1":                            "10.0.0.1",
		"10.1.2.3/8, 127.0.0.1 ,::1":          "10.0.0.0/8,127.0.0.1,::1",
		"fd00::/8,2001:db8::1/128":            "fd00::/8,2001:db8::1",
		"::ffff:10.0.0.1,::ffff:10.0.0.0/104": "10.0.0.1,10.0.0.0/8",
	} {
		p, err := webkit.ParseTrustedProxies(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseTrustedProxies(%q) = %q, %v; want %q", in, p, err, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0", "proxy.example", "10.0.0.1/", "fe80::1%eth0", "::ffff:10.0.0.0/8", "10.0.0.1;10.0.0.2", "*"} {
		if _, err := webkit.ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "10.0.0.0/8") {
			t.Errorf("ParseTrustedProxies(%q): %v, want an error that shows the form", bad, err)
		}
	}
}

// ClientIP on a Fiber app: without ClientAddresses (or with no trusted proxy) the peer's
// address whatever the header; with the peer trusted, the forwarded client.
func TestClientIPOnAnApp(t *testing.T) {
	for _, c := range []struct {
		name    string
		mw      []fiber.Handler
		headers []string // X-Forwarded-For lines
		want    string
	}{
		{"no middleware", nil, []string{"198.51.100.1"}, "0.0.0.0"},
		{"no trusted proxy", []fiber.Handler{webkit.ClientAddresses(proxies(t, ""))}, []string{"198.51.100.1"}, "0.0.0.0"},
		{"the peer is not trusted", []fiber.Handler{webkit.ClientAddresses(proxies(t, "10.0.0.0/8"))}, []string{"198.51.100.1"}, "0.0.0.0"},
		{"the peer is trusted", []fiber.Handler{webkit.ClientAddresses(proxies(t, "0.0.0.0/32"))}, []string{"198.51.100.1"}, "198.51.100.1"},
		{"two header lines", []fiber.Handler{webkit.ClientAddresses(proxies(t, "0.0.0.0"))}, []string{"1.1.1.1", "198.51.100.1"}, "198.51.100.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := fiber.New()
			for _, mw := range c.mw {
				app.Use(mw)
			}
			app.Get("/", func(c *fiber.Ctx) error { return c.SendString(webkit.ClientIP(c)) })
			req := httptest.NewRequest("GET", "/", nil)
			for _, h := range c.headers {
				req.Header.Add("X-Forwarded-For", h)
			}
			res, err := app.Test(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			if string(b) != c.want {
				t.Fatalf("client %q, want %q", b, c.want)
			}
		})
	}
}
