package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/ratelimit"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

var (
	_ webkit.Limiter = (*ratelimit.Memory)(nil)
	_ webkit.Limiter = (*ratelimit.Redis)(nil)
)

// recordingLimiter is a Limiter that records every call and, while fail is set, fails them
// all (Redis down); otherwise it asks next.
type recordingLimiter struct {
	next webkit.Limiter
	mu   sync.Mutex
	keys []string
	fail error
}

func (l *recordingLimiter) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	l.mu.Lock()
	l.keys = append(l.keys, fmt.Sprintf("%s %d/%v", key, limit, window))
	fail := l.fail
	l.mu.Unlock()
	if fail != nil {
		return false, 0, fail
	}
	return l.next.Allow(ctx, key, limit, window)
}

func (l *recordingLimiter) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// limited returns a harness option that installs rl with a limiter on its own fake clock,
// which the test advances to let the window pass.
func limited(rl httpapi.RateLimits) (option, *memory.FakeClock, *recordingLimiter) {
	clock := memory.NewFakeClock(start)
	lim := &recordingLimiter{next: ratelimit.NewMemory(clock.Now)}
	rl.Limiter = lim
	return func(c *httpapi.Config) { c.RateLimits = rl }, clock, lim
}

func TestPerBuyerLimit(t *testing.T) {
	opt, clock, lim := limited(httpapi.RateLimits{PerBuyer: 3, Window: time.Minute})
	h := newHarness(t, opt)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 20)...)
	alice, bob := h.token("alice"), h.token("bob")

	for i := range 3 {
		h.placeOrder(alice, fmt.Sprintf("alice-key-%d", i), 1, 1)
	}
	before := h.levels(1)
	r := h.order(alice, "alice-key-3", `{"product_id":1,"qty":1}`)
	wantError(t, r, 429, "rate_limited")
	// 3 per minute: one slot every 20s.
	if got := r.header.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20", got)
	}
	if after := h.levels(1); after != before {
		t.Fatalf("a refused order changed the gate: %+v, then %+v", before, after)
	}

	// Another buyer has a budget of his own.
	h.placeOrder(bob, "bob-key-0", 1, 1)

	// One interval later alice has one order back, and only one.
	clock.Advance(20 * time.Second)
	h.placeOrder(alice, "alice-key-3", 1, 1)
	wantError(t, h.order(alice, "alice-key-4", `{"product_id":1,"qty":1}`), 429, "rate_limited")

	// The key is the verified buyer; an invalid token never reaches the buyer limit.
	wantError(t, h.order("not-a-token", "x-key-0000", `{"product_id":1,"qty":1}`), 401, "unauthorized")
	want := "buyer:alice 3/1m0s"
	for _, c := range lim.calls() {
		if !strings.HasPrefix(c, "buyer:alice ") && !strings.HasPrefix(c, "buyer:bob ") {
			t.Fatalf("limiter called with %q", c)
		}
	}
	if calls := lim.calls(); calls[0] != want || len(calls) != 7 {
		t.Fatalf("limiter calls %q, want 7 starting with %q", calls, want)
	}
}

func TestPerIPLimit(t *testing.T) {
	opt, clock, lim := limited(httpapi.RateLimits{PerIP: 2, Window: time.Second})
	h := newHarness(t, opt)
	alice := h.token("alice")

	wantError(t, h.getOrder(alice, "250301120000123412345678"), 404, "order_not_found")
	wantError(t, h.order("", "", `{}`), 401, "unauthorized") // unauthenticated requests count too
	r := h.getOrder(alice, "250301120000123412345678")
	wantError(t, r, 429, "rate_limited")
	if got := r.header.Get("Retry-After"); got != "1" { // 500ms, rounded up
		t.Errorf("Retry-After %q, want 1", got)
	}
	wantError(t, h.order(alice, "alice-key-0", `{"product_id":1,"qty":1}`), 429, "rate_limited")

	// Not limited: the payment callback (HMAC-authenticated, retried in bursts), /admin, /healthz.
	for range 5 {
		wantError(t, h.callback(paysig.Notice{OrderNo: "250301120000123412345678", Status: "paid", Amount: 1, PaymentRef: "x"}), 404, "order_not_found")
		wantStatus(t, h.admin("GET", "/admin/products", ""), 200)
		wantStatus(t, h.do("GET", "/healthz", nil), 200)
	}
	for _, c := range lim.calls() {
		if !strings.HasPrefix(c, "ip:") || !strings.HasSuffix(c, " 2/1s") {
			t.Fatalf("limiter called with %q, want only ip:<addr> 2/1s", c)
		}
	}
	if n := len(lim.calls()); n != 4 {
		t.Fatalf("%d limiter calls, want 4 (the callbacks, /admin and /healthz are not limited)", n)
	}

	clock.Advance(time.Second)
	wantError(t, h.getOrder(alice, "250301120000123412345678"), 404, "order_not_found")
}

// Both limits on an order: the IP's is charged first, then the buyer's.
func TestBothLimitsOnAnOrder(t *testing.T) {
	opt, _, lim := limited(httpapi.RateLimits{PerIP: 100, PerBuyer: 1, Window: time.Minute})
	h := newHarness(t, opt)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 5)...)
	alice := h.token("alice")
	h.placeOrder(alice, "alice-key-0", 1, 1)
	wantError(t, h.order(alice, "alice-key-1", `{"product_id":1,"qty":1}`), 429, "rate_limited")
	calls := lim.calls()
	if len(calls) != 4 || !strings.HasPrefix(calls[0], "ip:") || calls[1] != "buyer:alice 1/1m0s" {
		t.Fatalf("limiter calls %q, want ip then buyer per order", calls)
	}
}

// A limiter that cannot answer (Redis down) lets every request through and says so in the log,
// once and not once per request.
func TestLimiterFailureFailsOpen(t *testing.T) {
	opt, _, lim := limited(httpapi.RateLimits{PerIP: 1, PerBuyer: 1, Window: time.Minute})
	lim.fail = fmt.Errorf("redis rate limit: %w: dial tcp: connection refused", domain.ErrUnavailable)
	h := newHarness(t, opt)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 5)...)
	alice := h.token("alice")
	for i := range 3 {
		h.placeOrder(alice, fmt.Sprintf("alice-key-%d", i), 1, 1)
	}
	if l := h.levels(1); l.Sold != 3 {
		t.Fatalf("gate after three orders through a failing limiter: %+v", l)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "rate limiter failed; request let through"); n != 1 {
		t.Fatalf("%d warnings for 6 failed limiter calls, want 1 (throttled):\n%s", n, logs)
	}
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, "connection refused") {
		t.Fatalf("no warning with the limiter's error:\n%s", logs)
	}
	// The next warning, a throttle period later, counts what it held back.
	h.clock.Advance(11 * time.Second)
	h.placeOrder(alice, "alice-key-3", 1, 1)
	if !strings.Contains(h.logs.String(), `"suppressed_since_last":5`) {
		t.Fatalf("the second warning does not count the 5 held back:\n%s", h.logs.String())
	}
}

func TestRateLimitsOffByDefault(t *testing.T) {
	if rl := httpapi.DefaultConfig(adminToken).RateLimits; rl != (httpapi.RateLimits{}) {
		t.Fatalf("DefaultConfig has rate limits %+v", rl)
	}
}

func TestRateLimitWithoutLimiterPanics(t *testing.T) {
	for _, rl := range []httpapi.RateLimits{
		{PerIP: 1, Window: time.Minute},
		{PerBuyer: 1, Limiter: ratelimit.NewMemory(nil)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with %+v did not panic", rl)
				}
			}()
			newHarness(t, func(c *httpapi.Config) { c.RateLimits = rl })
		}()
	}
}

// Behind a trusted proxy the per-IP limit counts the client the proxy forwarded
// (X-Forwarded-For), each client with a budget of its own; what a client writes into the
// header itself moves it to no other budget. From a peer that is not trusted the header is
// ignored: every request is the peer's.
func TestPerIPLimitBehindATrustedProxy(t *testing.T) {
	const none = "250301120000123412345678"
	get := func(h *harness, tok, forwarded string) resp {
		h.t.Helper()
		return h.do("GET", "/api/orders/"+none, nil, "Authorization", bearer(tok), "X-Forwarded-For", forwarded)
	}
	// app.Test's requests come from 0.0.0.0: that is the proxy.
	trusted, err := webkit.ParseTrustedProxies("0.0.0.0, 10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	opt, _, lim := limited(httpapi.RateLimits{PerIP: 2, Window: time.Minute})
	h := newHarness(t, opt, func(c *httpapi.Config) { c.TrustedProxies = trusted })
	alice := h.token("alice")
	wantError(t, get(h, alice, "198.51.100.1"), 404, "order_not_found")
	wantError(t, get(h, alice, "198.51.100.1, 10.0.0.3"), 404, "order_not_found") // through a second proxy
	for _, spoof := range []string{"198.51.100.1", "203.0.113.7, 198.51.100.1", "10.0.0.9, 198.51.100.1", "garbage, 198.51.100.1"} {
		wantError(t, get(h, alice, spoof), 429, "rate_limited")
	}
	// Another client behind the same proxy, IPv6 too, has a budget of its own.
	wantError(t, get(h, alice, "198.51.100.2"), 404, "order_not_found")
	wantError(t, get(h, alice, "2001:db8::1"), 404, "order_not_found")
	for _, c := range lim.calls() {
		if !slices.Contains([]string{"ip:198.51.100.1 2/1m0s", "ip:198.51.100.2 2/1m0s", "ip:2001:db8::1 2/1m0s"}, c) {
			t.Fatalf("limiter called with %q", c)
		}
	}

	// The proxy not trusted: the header is the client's word, and ignored.
	other, err := webkit.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	opt, _, lim = limited(httpapi.RateLimits{PerIP: 2, Window: time.Minute})
	h = newHarness(t, opt, func(c *httpapi.Config) { c.TrustedProxies = other })
	alice = h.token("alice")
	wantError(t, get(h, alice, "198.51.100.1"), 404, "order_not_found")
	wantError(t, get(h, alice, "198.51.100.2"), 404, "order_not_found")
	wantError(t, get(h, alice, "198.51.100.3"), 429, "rate_limited")
	for _, c := range lim.calls() {
		if c != "ip:0.0.0.0 2/1m0s" {
			t.Fatalf("limiter called with %q, want the peer's address", c)
		}
	}
}
