package storefront_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/storefront"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// buy places an order of qty as a new English browser and returns the browser (holding the
// order's cookie), the order number and the secret.
func buy(t testing.TB, h *harness, p domain.Product, qty int, email string) (*browser, domain.OrderNo, string) {
	t.Helper()
	b := h.browser("en")
	no, secret := placed(t, b.post("/checkout", orderForm(t, b, p, fmt.Sprint(qty), email)))
	return b, no, secret
}

// TestOrderPageNeedsTheSecret: without the order's cookie the order page, its codes and its
// status are a not-found page, the same as for a missing order; ?key= with the right secret
// sets the cookie on the order's path and redirects to the URL without the key; a wrong key
// sets nothing.
func TestOrderPageNeedsTheSecret(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Secret", Price: 100}, 5)
	_, no, secret := buy(t, h, p, 1, "key@example.com")
	_, other, _ := buy(t, h, p, 1, "other@example.com")

	stranger := h.browser("en")
	missing := stranger.get("/orders/2503010000000000000000000000")
	wantStatus(t, missing, 404)
	for _, target := range []string{"/orders/" + string(no), "/orders/" + string(no) + "/codes.txt",
		"/orders/" + string(no) + "?key=wrong-key-123", "/orders/" + string(no) + "?key=" + secret + "x"} {
		r := stranger.get(target)
		wantStatus(t, r, 404)
		if r.body != missing.body {
			t.Errorf("%s answers differently from a missing order", target)
		}
		if r.cookie("shop_order") != nil {
			t.Errorf("%s set the order's cookie", target)
		}
	}

	r := stranger.get("/orders/" + string(no) + "?key=" + url.QueryEscape(secret))
	wantStatus(t, r, 303)
	if loc := r.header.Get("Location"); loc != "/orders/"+string(no) {
		t.Fatalf("Location %q", loc)
	}
	c := r.cookie("shop_order")
	if c == nil || c.Value != secret || c.Path != "/orders/"+string(no) || !c.HttpOnly {
		t.Fatalf("cookie %+v", c)
	}
	page := stranger.get("/orders/" + string(no))
	wantStatus(t, page, 200)
	wantContains(t, page, string(no), "Waiting for payment", `action="/orders/`+string(no)+`/pay"`)
	if strings.Contains(page.body, secret) {
		t.Error("the order page shows the secret")
	}
	// Its cookie opens this order only.
	wantStatus(t, stranger.get("/orders/"+string(other)), 404)
}

// TestCodesOnlyOncePaid: the codes are on the order page (with copy buttons and the TXT
// download) only once the order is paid; the download is an attachment never stored, and no
// code is in the log.
func TestCodesOnlyOncePaid(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Codes", Price: 100}, 5)
	b, no, _ := buy(t, h, p, 2, "codes@example.com")
	page := b.get("/orders/" + string(no))
	if strings.Contains(page.body, "CODE-") {
		t.Fatalf("codes before payment: %s", page.body)
	}
	wantStatus(t, b.get("/orders/"+string(no)+"/codes.txt"), 404)

	h.pay(no)
	page = b.get("/orders/" + string(no))
	wantStatus(t, page, 200)
	wantContains(t, page, "Your codes", `class="copy"`, `src="/static/shop/copy.js"`, "/orders/"+string(no)+"/codes.txt")
	v, err := h.shop.Sales.AdminOrder(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Order.Revealed() {
		t.Error("showing the codes did not record the reveal")
	}
	txt := b.get("/orders/" + string(no) + "/codes.txt")
	wantStatus(t, txt, 200)
	lines := strings.Fields(txt.body)
	if len(lines) != 2 {
		t.Fatalf("codes.txt: %q", txt.body)
	}
	for _, code := range lines {
		if !strings.HasPrefix(code, "CODE-") || !strings.Contains(page.body, code) {
			t.Errorf("code %q not on the page", code)
		}
		if strings.Contains(h.logs.String(), code) {
			t.Errorf("code %q is in the log", code)
		}
	}
	if d := txt.header.Get("Content-Disposition"); !strings.HasPrefix(d, "attachment;") {
		t.Errorf("Content-Disposition %q", d)
	}
	if cc := txt.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if cc := page.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("order page Cache-Control %q", cc)
	}
}

// TestLookupAnswersAlike: a wrong secret, a wrong e-mail address and a missing order get the
// same status and the very same bytes; the right three open the order page.
func TestLookupAnswersAlike(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Lookup", Price: 100}, 5)
	_, no, secret := buy(t, h, p, 1, "find@example.com")
	b := h.browser("en")
	tok := csrfOf(t, b)
	try := func(no, email, secret string) resp {
		return b.post("/lookup", url.Values{"csrf": {tok}, "order_no": {no}, "email": {email}, "secret": {secret}})
	}
	wrong := "A"
	if secret[0] == 'A' {
		wrong = "B"
	}
	wrongSecret := try(string(no), "find@example.com", wrong+secret[1:])
	wrongEmail := try(string(no), "lost@example.com", secret)
	missing := try("2503010000000000000000000000", "find@example.com", secret)
	malformed := try("<no>", "find@example.com", secret)
	for name, r := range map[string]resp{"wrong e-mail": wrongEmail, "missing order": missing, "malformed number": malformed} {
		if r.status != wrongSecret.status || r.body != wrongSecret.body {
			t.Errorf("%s: %d, differs from a wrong secret's %d", name, r.status, wrongSecret.status)
		}
	}
	wantStatus(t, wrongSecret, 404)
	wantContains(t, wrongSecret, "No order matches these details")
	if strings.Contains(wrongSecret.body, string(no)) || strings.Contains(wrongSecret.body, "find@example.com") {
		t.Error("the failed lookup echoes what was typed")
	}

	ok := try(string(no), "find@EXAMPLE.com", secret)
	wantStatus(t, ok, 303)
	if loc := ok.header.Get("Location"); loc != "/orders/"+string(no) {
		t.Fatalf("Location %q", loc)
	}
	wantStatus(t, b.get("/orders/"+string(no)), 200)
}

// TestLookupIsRateLimited: past the limit per client address, lookups are refused with a
// page in the buyer's language, before any order is read; the window's end lets them again.
func TestLookupIsRateLimited(t *testing.T) {
	h := newHarness(t)
	b := h.browser("zh-CN")
	tok := csrfOf(t, b)
	form := url.Values{"csrf": {tok}, "order_no": {"2503010000000000000000000000"}, "email": {"a@example.com"}, "secret": {"x"}}
	for i := range 10 {
		form.Set("order_no", fmt.Sprintf("25030100000000000000000000%02d", i))
		wantStatus(t, b.post("/lookup", form), 404)
	}
	r := b.post("/lookup", form)
	wantStatus(t, r, 429)
	wantContains(t, r, "尝试次数过多")
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	h.clock.Advance(61 * time.Second)
	wantStatus(t, b.post("/lookup", form), 404)
}

// everyAddressLimiter is the memory limiter as seen by clients each on their own address:
// it never refuses a per-address key, so only the per-order limit is left to hold.
type everyAddressLimiter struct{ webkit.Limiter }

func (l everyAddressLimiter) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	if strings.HasPrefix(key, "shop-lookup-ip:") {
		return true, 0, nil
	}
	return l.Limiter.Allow(ctx, key, limit, window)
}

// TestLookupIsRateLimitedPerOrder: one order number is limited however many addresses try
// it; another number is not.
func TestLookupIsRateLimitedPerOrder(t *testing.T) {
	h := newHarness(t, option{cfg: func(c *storefront.Config) {
		c.Limiter = everyAddressLimiter{c.Limiter}
	}})
	b := h.browser("en")
	tok := csrfOf(t, b)
	form := url.Values{"csrf": {tok}, "order_no": {"2503010000000000000000000001"}, "email": {"a@example.com"}, "secret": {"x"}}
	for range 10 {
		wantStatus(t, b.post("/lookup", form), 404)
	}
	wantStatus(t, b.post("/lookup", form), 429)
	form.Set("order_no", "2503010000000000000000000002")
	wantStatus(t, b.post("/lookup", form), 404)
}
