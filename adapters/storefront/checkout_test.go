package storefront_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

var (
	orderNoText = regexp.MustCompile(`<dt>[^<]*</dt><dd><code>([^<]+)</code></dd>`)
	secretText  = regexp.MustCompile(`<p class="secret-value"><code>([^<]+)</code></p>`)
)

// orderForm reads the product page as b, sends its order form and returns the review page's
// form, which places the order (its CSRF token and fresh idempotency key included).
func orderForm(t testing.TB, b *browser, p domain.Product, qty, email string) url.Values {
	t.Helper()
	wantStatus(t, b.get(path(p)), 200)
	r := b.post("/checkout/review", url.Values{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {qty},
		"email": {email}, "provider": {"dev"}})
	wantStatus(t, r, 200)
	return url.Values{"csrf": {field(t, csrfField, r.body)}, "key": {field(t, keyField, r.body)},
		"product": {field(t, productField, r.body)}, "qty": {field(t, qtyField, r.body)},
		"email": {field(t, emailField, r.body)}, "provider": {field(t, providerField, r.body)}}
}

var (
	productField  = regexp.MustCompile(`name="product" value="([^"]+)"`)
	qtyField      = regexp.MustCompile(`name="qty" value="([^"]+)"`)
	emailField    = regexp.MustCompile(`name="email" value="([^"]+)"`)
	providerField = regexp.MustCompile(`name="provider" value="([^"]+)"`)
)

// placed is a confirmation page's order number and secret.
func placed(t testing.TB, r resp) (domain.OrderNo, string) {
	t.Helper()
	wantStatus(t, r, 200)
	return domain.OrderNo(field(t, orderNoText, r.body)), field(t, secretText, r.body)
}

// orders lists every order of the shop.
func (h *harness) orders() []domain.Order {
	h.t.Helper()
	os, err := h.shop.Sales.SearchOrders(context.Background(), domain.OrderFilter{Limit: 100})
	if err != nil {
		panic(err)
	}
	return os
}

// TestCheckoutConfirmsWithTheSecret: a guest order placed through the form shows its number,
// the amount the server computed (the tier's price, whatever the form says), the access
// secret with the note to keep it, and the pay form; the browser gets the order's cookie,
// scoped to the order's path.
func TestCheckoutConfirmsWithTheSecret(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Tiered", Price: 10000, Tiers: []domain.PriceTier{{MinQty: 3, UnitPrice: 9000}}}, 5)
	b := h.browser("en")
	form := orderForm(t, b, p, "3", " Buyer@Example.COM ")
	form.Set("amount", "1")
	r := b.post("/checkout", form)
	no, secret := placed(t, r)
	wantContains(t, r, "270.00 CNY", "This key is shown only once", `action="/orders/`+string(no)+`/pay"`, "Waiting for payment")
	if len(secret) < 22 {
		t.Errorf("secret %q is short", secret)
	}
	c := r.cookie("shop_order")
	if c == nil || c.Value != secret || c.Path != "/orders/"+string(no) || !c.HttpOnly || c.SameSite != 2 {
		t.Fatalf("order cookie %+v", c)
	}
	os := h.orders()
	if len(os) != 1 || os[0].Amount() != 27000 || os[0].Qty() != 3 || os[0].No() != no {
		t.Fatalf("orders: %+v", os)
	}
	if strings.Contains(h.logs.String(), secret) {
		t.Error("the secret is in the log")
	}
}

// TestDoubleSubmitShowsTheSameOrder: the same form sent again, even many times at once, places
// one order and every answer shows it with the same secret.
func TestDoubleSubmitShowsTheSameOrder(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Once", Price: 100}, 5)
	b := h.browser("en")
	form := orderForm(t, b, p, "1", "twice@example.com")
	no, secret := placed(t, b.post("/checkout", form))
	again := b.post("/checkout", form)
	no2, secret2 := placed(t, again)
	if no2 != no || secret2 != secret {
		t.Fatalf("replay: %s %s, want %s %s", no2, secret2, no, secret)
	}
	wantContains(t, again, "This form was already sent")

	form2 := orderForm(t, b, p, "1", "many@example.com")
	var wg sync.WaitGroup
	got := make([]resp, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = b.h.do("POST", "/checkout", strings.NewReader(form2.Encode()), "Content-Type",
				"application/x-www-form-urlencoded", "Cookie", b.header("/checkout"), "Accept-Language", "en")
		}()
	}
	wg.Wait()
	var first domain.OrderNo
	for _, r := range got {
		if r.status != 200 {
			// A submit racing the first may find it still in progress: a page saying so.
			if r.status != 409 || !strings.Contains(r.body, "still being placed") {
				t.Fatalf("concurrent submit: %s", r)
			}
			continue
		}
		n, _ := placed(t, r)
		if first == "" {
			first = n
		}
		if n != first {
			t.Fatalf("two orders from one form: %s and %s", first, n)
		}
	}
	if n := len(h.orders()); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
}

// TestRefusalsArePages: every refusal is an HTML page in the buyer's language with a way back
// to the product, never JSON, and places nothing.
func TestRefusalsArePages(t *testing.T) {
	h := newHarness(t)
	stocked := h.product(application.NewProduct{Name: "Stocked", Price: 100, MaxPerOrder: 2, Sale: domain.SaleRules{BuyerLimit: 2}}, 10)
	empty := h.product(application.NewProduct{Name: "Empty", Price: 100}, 0)
	later := h.product(application.NewProduct{Name: "Later", Price: 100, Sale: domain.SaleRules{StartsAt: start.Add(time.Hour)}}, 3)
	over := h.product(application.NewProduct{Name: "Over", Price: 100, Sale: domain.SaleRules{EndsAt: start.Add(time.Minute)}}, 3)
	pre := h.browser("zh-CN")
	overForm := orderForm(t, pre, over, "1", "a@example.com") // rendered while on sale
	h.clock.Advance(2 * time.Minute)

	// One unit held by the address: another two would pass the per-buyer limit of 2.
	holder := h.browser("en")
	placed(t, holder.post("/checkout", orderForm(t, holder, stocked, "1", "holder@example.com")))

	for _, c := range []struct {
		name         string
		lang         string
		form         func(b *browser) url.Values
		status       int
		text         string
		back         string
		ordersBefore int
	}{
		{"sold out", "en", func(b *browser) url.Values { return orderFormRaw(t, b, empty, "1", "x@example.com") }, 409, "Sorry, it is sold out.", path(empty), 0},
		{"sold out zh", "zh-CN", func(b *browser) url.Values { return orderFormRaw(t, b, empty, "1", "x@example.com") }, 409, "抱歉，商品已售罄。", path(empty), 0},
		{"not started", "en", func(b *browser) url.Values { return orderFormRaw(t, b, later, "1", "x@example.com") }, 409, "The sale has not started yet", path(later), 0},
		{"not started zh", "zh-CN", func(b *browser) url.Values { return orderFormRaw(t, b, later, "1", "x@example.com") }, 409, "还未开售", path(later), 0},
		{"ended", "zh-CN", func(b *browser) url.Values { overForm.Set("csrf", csrfOf(t, b)); return overForm }, 409, "本次销售已结束。", path(over), 0},
		{"quantity", "en", func(b *browser) url.Values { return orderFormRaw(t, b, stocked, "3", "x@example.com") }, 422, "This quantity cannot be ordered", path(stocked), 0},
		{"quantity not a number", "zh-CN", func(b *browser) url.Values { return orderFormRaw(t, b, stocked, "two", "x@example.com") }, 422, "购买数量请填写整数。", path(stocked), 0},
		{"e-mail", "en", func(b *browser) url.Values { return orderFormRaw(t, b, stocked, "1", "not-an-address") }, 422, "This e-mail address does not look right", path(stocked), 0},
		{"e-mail zh", "zh-CN", func(b *browser) url.Values { return orderFormRaw(t, b, stocked, "1", "a@@b") }, 422, "邮箱格式不正确", path(stocked), 0},
		{"holding limit", "en", func(b *browser) url.Values { return orderFormRaw(t, b, stocked, "2", " holder@EXAMPLE.com") }, 409, "over the limit per e-mail address", path(stocked), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.orders())
			b := h.browser(c.lang)
			r := b.post("/checkout", c.form(b))
			wantStatus(t, r, c.status)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("Content-Type %q", ct)
			}
			wantContains(t, r, c.text, `href="`+c.back+`"`, `lang="`+c.lang+`"`)
			if after := len(h.orders()); after != before {
				t.Fatalf("a refused order was placed: %d orders, were %d", after, before)
			}
		})
	}
}

// orderFormRaw is orderForm for a product whose page may show no form (sold out, not
// started): the key and the CSRF token are made up as a script would.
func orderFormRaw(t testing.TB, b *browser, p domain.Product, qty, email string) url.Values {
	t.Helper()
	return url.Values{"csrf": {csrfOf(t, b)}, "key": {fmt.Sprintf("made-up-key-%d", keys.Add(1))},
		"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {qty}, "email": {email}, "provider": {"dev"}}
}

var keys atomic.Int64

// csrfOf is the browser's CSRF token, read off the lookup page.
func csrfOf(t testing.TB, b *browser) string {
	t.Helper()
	return field(t, csrfField, b.get("/lookup").body)
}

// TestCSRFRefused: a POST without the token, with a wrong one, or with another browser's
// token is a 403 page and changes nothing.
func TestCSRFRefused(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Guarded", Price: 100}, 5)
	b, other := h.browser("en"), h.browser("zh-CN")
	form := orderForm(t, b, p, "1", "csrf@example.com")
	otherToken := csrfOf(t, other)
	for name, tok := range map[string]string{"missing": "", "wrong": "x" + form.Get("csrf")[1:], "another browser's": otherToken} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("csrf", tok)
		if tok == "" {
			f.Del("csrf")
		}
		r := b.post("/checkout", f)
		wantStatus(t, r, 403)
		wantContains(t, r, "This form has expired or did not come from this shop")
		if strings.Contains(r.body, "secret-value") {
			t.Fatalf("%s token: an order", name)
		}
	}
	// No cookie at all (a cross-site form): refused too.
	r := h.do("POST", "/checkout", strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, r, 403)
	for _, target := range []string{"/lookup", "/orders/X1/pay"} {
		wantStatus(t, b.post(target, url.Values{"order_no": {"X1"}}), 403)
	}
	if n := len(h.orders()); n != 0 {
		t.Fatalf("%d orders placed without a valid token", n)
	}
}

// TestReviewRefusesWhatTheCheckoutWould: the review page prices the order from the snapshot
// (the quantity's tier) and refuses, with the checkout's pages, a quantity out of range, a bad
// e-mail address and a product not on sale; it places nothing, and a double-posted review
// gives two different keys (each review page is one order).
func TestReviewRefusesWhatTheCheckoutWould(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Tiered", Price: 1000, MaxPerOrder: 4,
		Tiers: []domain.PriceTier{{MinQty: 3, UnitPrice: 900}}}, 5)
	gone := h.product(application.NewProduct{Name: "Gone", Price: 100}, 0)
	b := h.browser("en")
	review := func(p domain.Product, qty, email string) resp {
		return b.post("/checkout/review", url.Values{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {qty},
			"email": {email}, "provider": {"dev"}})
	}
	r := review(p, "3", " Buyer@Example.COM ")
	wantStatus(t, r, 200)
	wantContains(t, r, "9.00 CNY", "27.00 CNY", `name="email" value="Buyer@example.com"`)
	for _, tc := range []struct {
		p          domain.Product
		qty, email string
		status     int
		says       string
	}{
		{p, "0", "a@example.com", 422, "quantity"},
		{p, "5", "a@example.com", 422, "quantity"},
		{p, "two", "a@example.com", 422, "number"},
		{p, "1", "not-an-address", 422, "e-mail"},
		{gone, "1", "a@example.com", 409, "sold out"},
	} {
		r := review(tc.p, tc.qty, tc.email)
		if r.status != tc.status || !strings.Contains(strings.ToLower(r.body), tc.says) {
			t.Errorf("review of %s × %s for %q: %d, want %d saying %q: %s", tc.p.Name(), tc.qty, tc.email, r.status, tc.status, tc.says, r.body)
		}
	}
	if k1, k2 := field(t, keyField, review(p, "1", "a@example.com").body), field(t, keyField, review(p, "1", "a@example.com").body); k1 == k2 {
		t.Error("two review pages share a key")
	}
	if n := len(h.orders()); n != 0 {
		t.Fatalf("reviews placed %d orders", n)
	}
}

// TestCrossSitePostsRefused: a form posted from another site — an Origin naming another host,
// or Sec-Fetch-Site: cross-site (with Origin "null" too) — is a 403 page on every POST, the product form's
// review included, even with a valid token, and places nothing; the same forms from the shop's
// own pages pass.
func TestCrossSitePostsRefused(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Guarded", Price: 100}, 5)
	b := h.browser("en")
	form := orderForm(t, b, p, "1", "cross@example.com")
	review := url.Values{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {"1"}, "email": {"cross@example.com"}, "provider": {"dev"}}
	posts := map[string]url.Values{"/checkout/review": review, "/checkout": form,
		"/lookup":        {"csrf": form["csrf"], "order_no": {"X1"}, "email": {"a@example.com"}, "secret": {"s"}},
		"/orders/X1/pay": {"csrf": form["csrf"], "provider": {"dev"}}}
	cross := [][]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"},
		{"Origin", "null", "Sec-Fetch-Site", "cross-site"}, {"Origin", "http://example.com.evil.example"}}
	for target, f := range posts {
		for _, hdr := range cross {
			r := b.do("POST", target, strings.NewReader(f.Encode()), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
			if r.status != 403 || !strings.Contains(r.body, "This form has expired or did not come from this shop") {
				t.Fatalf("%s with %s: %s", target, hdr, r)
			}
		}
	}
	if n := len(h.orders()); n != 0 {
		t.Fatalf("%d orders placed by cross-site posts", n)
	}
	// The shop's own pages: same origin (Origin null: their Referrer-Policy is no-referrer).
	same := []string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}
	r := b.do("POST", "/checkout/review", strings.NewReader(review.Encode()), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, same...)...)
	wantStatus(t, r, 200)
	same = []string{"Origin", "http://example.com", "Sec-Fetch-Site", "same-origin"}
	r = b.do("POST", "/checkout", strings.NewReader(form.Encode()), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, same...)...)
	wantStatus(t, r, 200)
	if n := len(h.orders()); n != 1 {
		t.Fatalf("%d orders from the shop's own form, want 1", n)
	}
}
