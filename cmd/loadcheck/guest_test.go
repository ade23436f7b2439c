package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The shapes of the shop's pages the walk reads (adapters/storefront/templates), as rendered.
const (
	productPage = `<main><h1>Card</h1>
<form class="checkout" id="checkout" method="post" action="/checkout">
  <input type="hidden" name="csrf" value="tok&#43;1">
  <input type="hidden" name="key" value="%s">
  <input type="hidden" name="product" value="7">
  <label>Qty <input type="number" name="qty" value="1" min="1" max="10" required inputmode="numeric"></label>
  <label>E-mail <input type="email" name="email" required autocomplete="email" maxlength="254"></label>
  <fieldset><legend>Pay with</legend>
    <label class="radio"><input type="radio" name="provider" value="alipay" checked> Alipay</label>
    <label class="radio"><input type="radio" name="provider" value="dev"> Dev</label>
  </fieldset>
  <button type="submit">Buy</button>
</form></main>`
	// productReviewPage is the product page that is the same for every buyer: no key, no
	// CSRF token; its form asks for the review page.
	productReviewPage = `<main><h1>Card</h1>
<form class="lang" method="get" action="/lang"><input type="hidden" name="to" value="en"></form>
<form class="checkout" id="checkout" method="post" action="/checkout/review">
  <input type="hidden" name="product" value="7">
  <label>Qty <input type="number" name="qty" value="1" min="1" max="10" required inputmode="numeric"></label>
  <label>E-mail <input type="email" name="email" required autocomplete="email" maxlength="254"></label>
  <fieldset><legend>Pay with</legend>
    <label class="radio"><input type="radio" name="provider" value="dev" checked> Dev</label>
  </fieldset>
  <button type="submit">Buy</button>
</form></main>`
	reviewPage = `<main><h1>Check your order</h1><dl class="review"><dt>Qty</dt><dd>%[2]s</dd></dl>
<form method="post" action="/checkout">
  <input type="hidden" name="csrf" value="%[1]s">
  <input type="hidden" name="key" value="%[3]s">
  <input type="hidden" name="product" value="7">
  <input type="hidden" name="qty" value="%[2]s">
  <input type="hidden" name="email" value="%[4]s">
  <input type="hidden" name="provider" value="%[5]s">
  <button type="submit">Place the order</button>
</form></main>`
	confirmPage = `<main><h1>Thank you</h1>
<section class="secret"><h2>Your access key</h2>
  <p class="secret-value"><code>%[1]s</code></p></section>
<dl class="summary">
  <dt>Order</dt><dd><code>%[2]s</code></dd>
  <dt>Qty</dt><dd>1</dd>
</dl>
<form class="pay" method="post" action="/orders/%[3]s/pay">
  <input type="hidden" name="csrf" value="%[4]s">
  <fieldset><label class="radio"><input type="radio" name="provider" value="dev" checked> Dev</label></fieldset>
  <button type="submit">Pay now</button>
</form></main>`
	orderPageWithCodes = `<dl class="summary"><dt>Order</dt><dd><code>N1</code></dd></dl>
<section class="codes">
  <h2>Your codes</h2>
  <ol>
  <li><code id="code-0">LC-7-00000001</code> <button type="button" class="copy" data-copy="code-0" hidden>Copy</button></li>
  <li><code id="code-1">LC-7-00000002</code> <button type="button" class="copy" data-copy="code-1" hidden>Copy</button></li>
  </ol>
</section>`
)

func TestPagesAreReadAsABrowserWould(t *testing.T) {
	f, ok := keyForm(fmt.Sprintf(productPage, "k1"))
	if !ok {
		t.Fatal("no order form found on the product page")
	}
	got := f.fill(map[string]string{"qty": "2", "email": "a@load.example", "provider": "dev", "csrf": "forged"})
	want := url.Values{"csrf": {"tok+1"}, "key": {"k1"}, "product": {"7"}, "qty": {"2"}, "email": {"a@load.example"}, "provider": {"dev"}}
	if got.Encode() != want.Encode() || f.action != "/checkout" {
		t.Fatalf("product form: %s to %q, want %s to /checkout", got.Encode(), f.action, want.Encode())
	}
	pr, ok := productForm(productReviewPage)
	if got := pr.fill(map[string]string{"qty": "2", "email": "a@load.example", "provider": "dev"}); !ok || pr.action != "/checkout/review" ||
		got.Encode() != "email=a%40load.example&product=7&provider=dev&qty=2" {
		t.Fatalf("review-step product form: %s to %q", got.Encode(), pr.action)
	}
	if _, ok := keyForm(productReviewPage); ok {
		t.Fatal("a product page without a key taken for a form that places the order")
	}
	r, ok := keyForm(fmt.Sprintf(reviewPage, "tok+1", "2", "k2", "a@load.example", "dev"))
	if got := r.fill(map[string]string{"qty": "9", "email": "other@load.example"}); !ok || got.Get("qty") != "2" ||
		got.Get("email") != "a@load.example" || got.Get("key") != "k2" {
		t.Fatalf("review form: %s; its hidden fields must go as the page gave them", got.Encode())
	}
	page := fmt.Sprintf(confirmPage, "s3cr&#43;t", "N1", "N1", "tok&#43;1")
	if no, secret, ok := confirmation(page); !ok || no != "N1" || secret != "s3cr+t" {
		t.Fatalf("confirmation: %q %q %v", no, secret, ok)
	}
	if _, ok := keyForm(page); ok {
		t.Fatal("the confirmation page's pay form taken for an order form")
	}
	if _, _, ok := confirmation(fmt.Sprintf(productPage, "k")); ok {
		t.Fatal("a product page taken for a confirmation")
	}
	if csrf := csrfOf(page, "/pay"); csrf != "tok+1" {
		t.Fatalf("pay form csrf %q", csrf)
	}
	if codes := pageCodes(orderPageWithCodes); strings.Join(codes, ",") != "LC-7-00000001,LC-7-00000002" {
		t.Fatalf("codes %v", codes)
	}
	if codes := pageCodes(fmt.Sprintf(confirmPage, "s", "N1", "N1", "t")); codes != nil {
		t.Fatalf("codes on a page without them: %v", codes)
	}
}

// fakeShop is the shop's form path in miniature: the product page, /checkout (straight to the
// confirmation, or first a review page), one order per key however many times it is sent,
// the pay form's 303 to the dev pay link and its confirm.
type fakeShop struct {
	review bool
	mu     sync.Mutex
	orders map[string]string // key → order number
	paid   map[string]bool
	keys   int
}

func (s *fakeShop) start(t *testing.T) string {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	var base string
	app.Get("/p/:id", func(c *fiber.Ctx) error {
		s.mu.Lock()
		s.keys++
		key := fmt.Sprintf("key%d", s.keys)
		s.mu.Unlock()
		if s.review {
			return c.Type("html").SendString(productReviewPage)
		}
		c.Cookie(&fiber.Cookie{Name: "shop_csrf", Value: "1"})
		return c.Type("html").SendString(fmt.Sprintf(productPage, key))
	})
	app.Post("/checkout/review", func(c *fiber.Ctx) error {
		if !s.review || c.FormValue("provider") != "dev" || c.FormValue("email") == "" || c.FormValue("qty") == "" {
			return c.Status(400).SendString("bad form " + string(c.Body()))
		}
		s.mu.Lock()
		s.keys++ // a fresh key on every review page
		key := fmt.Sprintf("rev-%d", s.keys)
		s.mu.Unlock()
		// As the shop: a browser without a CSRF seed gets a new one, and the page's token is
		// the seed's (two review pages answered at once set two seeds, and one is lost).
		seed := c.Cookies("shop_csrf")
		if seed == "" {
			seed = "seed-" + key
			c.Cookie(&fiber.Cookie{Name: "shop_csrf", Value: seed})
		}
		return c.Type("html").SendString(fmt.Sprintf(reviewPage, "tok+"+seed, c.FormValue("qty"), key,
			c.FormValue("email"), c.FormValue("provider")))
	})
	app.Post("/checkout", func(c *fiber.Ctx) error {
		if c.Cookies("shop_csrf") == "" || c.FormValue("csrf") != "tok+"+c.Cookies("shop_csrf") || c.FormValue("provider") != "dev" ||
			c.FormValue("email") == "" || c.FormValue("qty") == "" || c.FormValue("key") == "" {
			return c.Status(403).SendString("bad form " + string(c.Body()))
		}
		key := strings.Clone(c.FormValue("key")) // fiber reuses its buffers after the handler
		time.Sleep(20 * time.Millisecond)        // the twin of a double submit arrives while this one runs
		s.mu.Lock()
		no, ok := s.orders[key]
		if !ok {
			no = fmt.Sprintf("N%d", len(s.orders)+1)
			s.orders[key] = no
		}
		s.mu.Unlock()
		c.Cookie(&fiber.Cookie{Name: "shop_order", Value: "sec-" + no, Path: "/orders/" + no})
		return c.Type("html").SendString(fmt.Sprintf(confirmPage, "sec-"+no, no, no, "tok+"+c.Cookies("shop_csrf")))
	})
	app.Post("/orders/:no/pay", func(c *fiber.Ctx) error {
		no := c.Params("no")
		if c.Cookies("shop_order") != "sec-"+no || c.FormValue("csrf") != "tok+"+c.Cookies("shop_csrf") || c.FormValue("provider") != "dev" {
			return c.Status(404).SendString("no access")
		}
		return c.Redirect(base+"/dev/pay/"+no+"?"+url.Values{"ref": {"r-" + no}, "sig": {"s-" + no}}.Encode(), 303)
	})
	app.Post("/dev/pay/:no/confirm", func(c *fiber.Ctx) error {
		no := c.Params("no")
		if c.FormValue("ref") != "r-"+no || c.FormValue("sig") != "s-"+no || c.FormValue("choice") != "pay" {
			return c.Status(400).SendString("forged")
		}
		s.mu.Lock()
		s.paid[strings.Clone(no)] = true
		s.mu.Unlock()
		return c.SendString("Paid")
	})
	base = serve(t, app)
	return base
}

// TestGuestWalkPlacesOneOrderAndPays: straight to the confirmation and through a review page
// alike, every walk ends with one order (a double submit's two answers name the same one) and
// a paying buyer's payment confirmed.
func TestGuestWalkPlacesOneOrderAndPays(t *testing.T) {
	for _, review := range []bool{false, true} {
		t.Run(fmt.Sprintf("review=%v", review), func(t *testing.T) {
			shop := &fakeShop{review: review, orders: map[string]string{}, paid: map[string]bool{}}
			base := shop.start(t)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			var walks []*guestWalk
			var wg sync.WaitGroup
			for i := range 12 {
				w := &guestWalk{buyer: i, email: fmt.Sprintf("b%d@load.example", i), qty: 1 + i%2, double: i%3 == 0, pays: i%4 != 0, base: base}
				walks = append(walks, w)
				wg.Go(func() { w.walk(context.Background(), tr, 7) })
			}
			wg.Wait()
			if len(shop.orders) != len(walks) {
				t.Fatalf("%d orders for %d walks", len(shop.orders), len(walks))
			}
			for _, w := range walks {
				if w.err != "" || w.no == "" || w.secret != "sec-"+w.no {
					t.Fatalf("walk %d: no %q secret %q err %q", w.buyer, w.no, w.secret, w.err)
				}
				if w.double && (len(w.named) != 2 || w.named[0] != w.named[1]) {
					t.Fatalf("double submit %d named %v, want the same order twice", w.buyer, w.named)
				}
				if w.paid != w.pays || shop.paid[w.no] != w.pays {
					t.Fatalf("walk %d: pays %v, paid %v, the shop says %v", w.buyer, w.pays, w.paid, shop.paid[w.no])
				}
				wantPosts, wantReviews := 1, 0
				if review {
					wantReviews = 1
				}
				if w.double {
					wantPosts *= 2 // the review step is sent once
				}
				if len(w.posts) != wantPosts || len(w.reviews) != wantReviews {
					t.Fatalf("walk %d: %d checkout and %d review POSTs timed, want %d and %d", w.buyer, len(w.posts), len(w.reviews),
						wantPosts, wantReviews)
				}
			}
			if c := walkCheck(walks); !c.OK {
				t.Fatalf("walk check: %s", c.Detail)
			}
		})
	}
}

// TestGuestWalkReportsARefusal: a checkout the shop refuses leaves the walk without an order,
// with the answer quoted, and the walk check fails.
func TestGuestWalkReportsARefusal(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/p/:id", func(c *fiber.Ctx) error { return c.Type("html").SendString(fmt.Sprintf(productPage, "k")) })
	app.Post("/checkout", func(c *fiber.Ctx) error { return c.Status(409).Type("html").SendString("<p>Sold out</p>") })
	w := &guestWalk{buyer: 1, email: "b@load.example", qty: 1, pays: true, base: serve(t, app)}
	w.walk(context.Background(), http.DefaultTransport, 7)
	if w.no != "" || !strings.Contains(w.err, "409") || !strings.Contains(w.err, "Sold out") {
		t.Fatalf("no %q err %q", w.no, w.err)
	}
	if c := walkCheck([]*guestWalk{w}); c.OK {
		t.Fatalf("walk check passed a refused walk: %s", c.Detail)
	}
}

// mailFixture is a sale of three orders (two PAID, one CLOSED) and the e-mails it should get.
func mailFixture() (map[string]saleOrder, map[string][]string, []inboxMail) {
	orders := map[string]saleOrder{
		"2026120401": {no: "2026120401", status: "PAID", email: "a@load.example", buyer: "g.a", qty: 2},
		"2026120402": {no: "2026120402", status: "PAID", email: "b@load.example", buyer: "g.b", qty: 1},
		"2026120403": {no: "2026120403", status: "CLOSED", email: "c@load.example", buyer: "g.c", qty: 1},
	}
	codes := map[string][]string{"2026120401": {"LC-7-00000001", "LC-7-00000002"}, "2026120402": {"LC-7-00000003"}}
	mails := []inboxMail{
		{subject: "您的订单 2026120401 已付款", to: []string{"a@load.example"}, text: "卡密：\nLC-7-00000002\nLC-7-00000001\n"},
		{subject: "Your order 2026120402 is paid", to: []string{"b@load.example"}, text: "Your codes:\nLC-7-00000003\n"},
	}
	return orders, codes, mails
}

func TestMailChecks(t *testing.T) {
	codeIn := regexp.MustCompile(`LC-7-\d{8}`)
	verdicts := func(mutate func(map[string]saleOrder, map[string][]string, []inboxMail) []inboxMail) []bool {
		orders, codes, mails := mailFixture()
		mails = mutate(orders, codes, mails)
		var out []bool
		for _, c := range mailChecks(orders, codes, map[string]string{}, mails, codeIn) {
			out = append(out, c.OK)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		mutate func(map[string]saleOrder, map[string][]string, []inboxMail) []inboxMail
		want   []bool // one e-mail each, its codes, no stray e-mail
	}{
		{"as it should be", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail { return m }, []bool{true, true, true}},
		{"a paid order without its e-mail", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail { return m[:1] },
			[]bool{false, true, true}},
		{"an e-mail sent twice", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail { return append(m, m[1]) },
			[]bool{false, true, true}},
		{"a code missing from the e-mail", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail {
			m[0].text = "LC-7-00000001"
			return m
		}, []bool{true, false, true}},
		{"another order's code in the e-mail", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail {
			m[1].text = "LC-7-00000001"
			return m
		}, []bool{true, false, true}},
		{"the page shows fewer codes than the order's qty", func(_ map[string]saleOrder, c map[string][]string, m []inboxMail) []inboxMail {
			c["2026120401"] = c["2026120401"][:1]
			m[0].text = "LC-7-00000001"
			return m
		}, []bool{true, false, true}},
		{"an e-mail for the closed order", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail {
			return append(m, inboxMail{subject: "Your order 2026120403 is paid", to: []string{"c@load.example"}})
		}, []bool{true, true, false}},
		{"an e-mail to another address", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail {
			m[1].to = []string{"c@load.example"}
			return m
		}, []bool{false, true, false}},
		{"an e-mail naming no order of the sale", func(_ map[string]saleOrder, _ map[string][]string, m []inboxMail) []inboxMail {
			return append(m, inboxMail{subject: "Your order 999 is paid", to: []string{"a@load.example"}})
		}, []bool{false, true, false}},
	} {
		got := verdicts(tc.mutate)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: verdicts %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDoubleCheck(t *testing.T) {
	orders, _, _ := mailFixture()
	one := []*guestWalk{{buyer: 1, double: true, named: []string{"2026120401", "2026120401"}}, {buyer: 2, named: []string{"2026120402"}}}
	if c := doubleCheck(one, orders); !c.OK {
		t.Fatalf("one order per double submit failed: %s", c.Detail)
	}
	split := []*guestWalk{{buyer: 1, double: true, named: []string{"2026120401", "2026120402"}}}
	if c := doubleCheck(split, orders); c.OK {
		t.Fatalf("a double submit shown two orders passed: %s", c.Detail)
	}
	orders["2026120404"] = saleOrder{no: "2026120404", status: "CLOSED", buyer: "g.a", qty: 1}
	if c := doubleCheck(one, orders); c.OK {
		t.Fatalf("a buyer with two orders passed: %s", c.Detail)
	}
	if c := doubleCheck(one[1:], map[string]saleOrder{}); c.OK {
		t.Fatalf("no double submit at all passed: %s", c.Detail)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := percentile(d, 0.5), percentile(d, 0.99); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Fatalf("p50 %s p99 %s", p50, p99)
	}
	if percentile(nil, 0.5) != 0 || percentile(d[:1], 0.99) != time.Millisecond {
		t.Fatal("edge cases")
	}
}
