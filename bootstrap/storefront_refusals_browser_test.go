package bootstrap_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"cardshop/bootstrap"
)

// refusalTexts are the words of the catalogue (adapters/i18n) each refusal page must show in
// one language.
type refusalTexts struct {
	lang, soldOut, notStarted, buyerLimit, rateLimited, csrf, notFound, orderNotFound, lookupLimited, pending, order, qr string
}

var refusalLangs = map[string]refusalTexts{
	"zh-CN": {lang: "zh-CN", soldOut: "商品已售罄", notStarted: "还未开售", buyerLimit: "每个邮箱的限购数量", rateLimited: "下单过于频繁",
		csrf:     "表单已过期或并非来自本店",
		notFound: "页面不存在", orderNotFound: "无法在此打开该订单", lookupLimited: "尝试次数过多", pending: "待支付", order: "我的订单",
		qr: "扫码支付"},
	"en": {lang: "en", soldOut: "it is sold out", notStarted: "The sale has not started yet", buyerLimit: "the limit per e-mail address",
		rateLimited: "Too many orders in a short time",
		csrf:        "This form has expired or did not come from this shop", notFound: "There is no such page",
		orderNotFound: "This order cannot be opened here", lookupLimited: "Too many attempts", pending: "Waiting for payment",
		order: "Your order", qr: "Scan to pay"},
}

// TestShopRefusalsInABrowser opens the shop's pages that the buyer's walk of
// TestShopInABrowser never reaches, in headless Chromium on a 390×844 phone in Chinese and on a
// desktop in English (whose pages must fit a phone's width too): the refusals of an order
// (sold out, not started, the per-buyer limit), the CSRF refusal (a form with a wrong token)
// and the cross-site one (a form posted from another origin), the not-found pages (a page and
// an order), the order page before payment, the QR pay page, and the lookup refused for too
// many attempts. Each must fit the window's width and say its text in the buyer's language;
// any other page error (a CSP violation included) fails the test. With SHOP_SCREENSHOTS=dir
// it writes refusal-*, notfound-*, order-pending-* and qr-*-phone PNGs.
func TestShopRefusalsInABrowser(t *testing.T) {
	chromium := needChromium(t)
	addr := freeAddr(t)
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_PUBLIC_URL=http://"+addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = addr
	withAlipayQR(t, &cfg)
	c := runService(t, cfg, io.Discard)
	// 1000 is sold out (no codes), 1001 starts in an hour, 1002 lets one buyer hold one code.
	c.want(201, "POST", "/admin/products", adminToken, `{"id":1000,"name":"售罄的卡 Sold-out card","price":1000,"max_per_order":5}`, nil)
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":1001,"name":"新品 New card","price":1000,"max_per_order":5,"starts_at":%q}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":1002,"name":"限购卡 Limited card","price":2500,"max_per_order":1,"buyer_limit":1}`, nil)
	for _, id := range []int{1001, 1002} {
		c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", id), adminToken,
			fmt.Sprintf("REF-%d-01\nREF-%d-02\nREF-%d-03\nREF-%d-04", id, id, id, id), nil)
	}
	shots := shopScreenshotDir(t)
	for _, run := range refusalRuns {
		t.Run(run.lang+"-"+run.device, func(t *testing.T) {
			b := newSizedBrowser(t, chromium, c.base, shots, run.width, run.height)
			browseRefusals(t, b, c, refusalLangs[run.lang], "-"+strings.SplitN(run.lang, "-", 2)[0]+"-"+run.device)
		})
	}
	// Orders past the per-IP limit (CARDSHOP_RATE_PER_IP), on a service of their own with a
	// small one: the budget is the client address's, shared by both browsers, so each sends
	// orders (of a product not on sale yet, so none is placed) until one is refused as too many.
	t.Run("rate-limited", func(t *testing.T) {
		cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_PUBLIC_URL=http://"+addr, "CARDSHOP_RATE_PER_IP=3"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr = freeAddr(t)
		c := runService(t, cfg, io.Discard)
		c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":1001,"name":"新品 New card","price":1000,"max_per_order":5,"starts_at":%q}`,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil)
		c.want(200, "POST", "/admin/products/1001/codes", adminToken, "RATE-01\nRATE-02", nil)
		for _, run := range refusalRuns {
			b := newSizedBrowser(t, chromium, c.base, shots, run.width, run.height)
			txt := refusalLangs[run.lang]
			b.do(chromedp.Navigate(c.base + "/lang?to=" + txt.lang + "&back=%2Fp%2F1001"))
			limited := false
			for i := 0; i < 10 && !limited; i++ {
				b.post("/checkout/review", map[string]string{"product": "1001", "qty": "1", "email": "rate@example.com"})
				b.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
				limited = strings.Contains(b.text(".error"), txt.rateLimited)
			}
			if !limited {
				t.Fatalf("%s: 10 orders from one address were never refused as too many", run.lang)
			}
			b.forget("/checkout", 409, 429)
			b.refusal("refusal-ratelimited-"+strings.SplitN(run.lang, "-", 2)[0]+"-"+run.device, txt.rateLimited)
			b.checkClean()
		}
	})
}

// TestQRPageMovesOnInABrowser: the QR pay page, on a 390 px phone in Chinese, leaves for the
// order page by itself when the order's payment fails (another payment of the order, at the
// dev provider in a second tab, reports a failure) and when the order is closed for want of
// payment (a service whose orders wait 8 s, swept every second); the order page then says so.
// TestShopInABrowser covers the payment; the status endpoint's answers are
// TestQRPageMovesOnWhenClosedOrFailed's (adapters/storefront).
func TestQRPageMovesOnInABrowser(t *testing.T) {
	chromium := needChromium(t)
	addr := freeAddr(t)
	const timeout = 8 * time.Second
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_PUBLIC_URL=http://"+addr,
		"CARDSHOP_ORDER_TIMEOUT="+timeout.String(), "CARDSHOP_SWEEP_INTERVAL=1s"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = addr
	withAlipayQR(t, &cfg)
	c := runService(t, cfg, io.Discard)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":1100,"name":"扫码卡 QR card","price":1000,"max_per_order":5}`, nil)
	c.want(200, "POST", "/admin/products/1100/codes", adminToken, "QR-01\nQR-02\nQR-03", nil)
	b := newSizedBrowser(t, chromium, c.base, "", 390, 844)
	b.do(chromedp.Navigate(c.base + "/lang?to=zh-CN&back=%2F"))
	qrPage := func(email string) string {
		b.do(chromedp.Navigate(c.base+"/p/1100"), chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email))
		b.submit(chromedp.Click(chromedp.CSS(`#checkout button[type=submit]`)))
		b.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
		no := b.text(".summary code")
		b.do(chromedp.Click(chromedp.CSS(`form.pay input[value=alipay]`)))
		b.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
		b.wantPath("/orders/" + no + "/pay/alipay")
		b.wantText("h1", "扫码支付")
		return no
	}
	movesOn := func(no, shown string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for b.path() != "/orders/"+no {
			if time.Now().After(deadline) {
				t.Fatalf("the QR page did not move on to the order page within %s (at %s)", within, b.path())
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.wantText("main", shown)
		b.fits("order " + shown)
	}

	// FAILED: the buyer tries the dev provider in another tab, and that payment fails.
	no := qrPage("failed@example.com")
	tctx, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(b.width, b.height)); err != nil { // opens the tab: no deadline, it lives on
		t.Fatal(err)
	}
	tab := &browser{t: t, ctx: tctx, base: b.base, width: b.width, height: b.height, urls: map[network.RequestID]string{},
		expected: map[string]int{}, allowed: map[network.RequestID]bool{}}
	tab.do(chromedp.Navigate(c.base + "/orders/" + no))
	tab.do(chromedp.Click(chromedp.CSS(`form.pay input[value=dev]`)))
	tab.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
	tab.wantPath("/dev/pay/" + no)
	tab.submit(chromedp.Click(chromedp.CSS(`button.fail`)))
	movesOn(no, "支付失败", stepTimeout)

	// CLOSED: nobody pays; the order times out and the sweeper closes it.
	no = qrPage("closed@example.com")
	movesOn(no, "已关闭", timeout+stepTimeout)
	// A poll in flight when the page leaves (the script's own move, or its meta refresh) is
	// cancelled by the browser: that is the page working, not a failure.
	b.mu.Lock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		if !(strings.Contains(p, "net::ERR_ABORTED") && strings.Contains(p, "/status.json")) {
			kept = append(kept, p)
		}
	}
	b.problems = kept
	b.mu.Unlock()
	b.checkClean()
}

// refusalRuns are the browsers of TestShopRefusalsInABrowser: a phone in Chinese, a desktop in
// English (whose pages screen checks at a phone's width too).
var refusalRuns = []struct {
	lang, device  string
	width, height int64
}{
	{"zh-CN", "phone", 390, 844},
	{"en", "desktop", browserWidth, browserHeight},
}

func browseRefusals(t *testing.T, b *browser, c client, txt refusalTexts, suffix string) {
	email := "refused" + strings.ReplaceAll(suffix, "-", ".") + "@example.com"
	b.do(chromedp.Navigate(c.base + "/lang?to=" + txt.lang + "&back=%2F"))
	b.wantPath("/")

	// Sold out: the review refuses the form (the product page offers none).
	b.do(chromedp.Navigate(c.base + "/p/1000"))
	b.expect(409, "/checkout/review")
	b.post("/checkout/review", map[string]string{"product": "1000", "qty": "1", "email": email})
	b.refusal("refusal-soldout"+suffix, txt.soldOut)

	// Not started: the review is shown (the countdown may end meanwhile), the order refused.
	b.do(chromedp.Navigate(c.base + "/p/1001"))
	b.post("/checkout/review", map[string]string{"product": "1001", "qty": "1", "email": email})
	b.expect(409, "/checkout")
	b.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
	b.refusal("refusal-notstarted"+suffix, txt.notStarted)

	// The per-buyer limit: one code per e-mail address; the first order holds it.
	order := func() {
		b.do(chromedp.Navigate(c.base + "/p/1002"))
		b.do(chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email))
		b.submit(chromedp.Click(chromedp.CSS(`#checkout button[type=submit]`)))
		b.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
	}
	order()
	no := b.text(".summary code")
	b.expect(409, "/checkout")
	order()
	b.refusal("refusal-buyerlimit"+suffix, txt.buyerLimit)

	// The order before payment, then its QR pay page.
	b.do(chromedp.Navigate(c.base + "/orders/" + no))
	b.wantText("h1", txt.order)
	b.wantText("main", txt.pending)
	b.screen("order-pending" + suffix)
	b.do(chromedp.Click(chromedp.CSS(`form.pay input[value=alipay]`)))
	b.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
	b.wantPath("/orders/" + no + "/pay/alipay")
	b.wantText("h1", txt.qr)
	b.do(chromedp.WaitReady(chromedp.CSS(`img.qr`)))
	if strings.HasSuffix(suffix, "-phone") {
		b.screen("qr" + suffix)
	} else { // TestShopInABrowser writes the desktop's: only check it fits, here and on a phone
		shots := b.shots
		b.shots = ""
		b.screen("qr" + suffix)
		b.shots = shots
	}

	// A form whose CSRF token is wrong (an old page, a forged form).
	b.do(chromedp.Navigate(c.base + "/p/1002"))
	b.expect(403, "/checkout")
	b.post("/checkout", map[string]string{"product": "1002", "qty": "1", "email": email, "csrf": "forged", "key": "k-" + no})
	b.refusal("refusal-csrf"+suffix, txt.csrf)

	// A form posted to the shop from another site (here a blank page's): refused whatever it
	// carries. The browser sends no SameSite cookie with it, so the page's language is the
	// browser's (Accept-Language), not necessarily the buyer's choice: either is right.
	b.do(chromedp.Navigate("about:blank"))
	b.expect(403, "/checkout/review")
	b.post(c.base+"/checkout/review", map[string]string{"product": "1002", "qty": "1", "email": email})
	b.wantPath("/checkout/review")
	if got := b.text(".error"); !strings.Contains(got, refusalLangs["en"].csrf) && !strings.Contains(got, refusalLangs["zh-CN"].csrf) {
		t.Fatalf("a cross-site form is answered %q, want the refusal", got)
	}
	b.screen("refusal-crosssite" + suffix)

	// Not found: a page, and an order this browser has no access to.
	b.expect(404, "/no-such-page")
	b.do(chromedp.Navigate(c.base + "/no-such-page"))
	b.refusal("notfound"+suffix, txt.notFound)
	b.expect(404, "/orders/2501010000000000000000000000")
	b.do(chromedp.Navigate(c.base + "/orders/2501010000000000000000000000"))
	b.refusal("notfound-order"+suffix, txt.orderNotFound)

	// The lookup refused for too many attempts (per address and per order number).
	limited := false
	for i := 0; i < 30 && !limited; i++ {
		b.do(chromedp.Navigate(c.base+"/lookup"),
			chromedp.SendKeys(chromedp.CSS(`input[name=order_no]`), no), chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
			chromedp.SendKeys(chromedp.CSS(`input[name=secret]`), "not-the-secret"))
		b.submit(chromedp.Click(chromedp.CSS(`form.lookup button[type=submit]`)))
		got, err := run(b, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatal(err)
		}
		limited = strings.Contains(got, txt.lookupLimited)
	}
	if !limited {
		t.Fatalf("30 wrong lookups of order %s were never refused as too many", no)
	}
	b.forget("/lookup", 404, 429)
	b.refusal("refusal-lookup-limited"+suffix, txt.lookupLimited)
	b.checkClean()
}

// post sends a form from the page the browser shows, as a buyer's browser would (same origin,
// the browser's cookies), and waits for the answer's page.
func (b *browser) post(action string, fields map[string]string) {
	b.t.Helper()
	js, err := json.Marshal(fields)
	if err != nil {
		b.t.Fatal(err)
	}
	b.submit(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const f = document.createElement("form");
		f.method = "post"; f.action = %q;
		for (const [k, v] of Object.entries(%s)) { const i = document.createElement("input"); i.type = "hidden";
			i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); })()`, action, js)))
}

// refusal checks a message page: its text in the buyer's language, a way back, the page fits;
// and writes its screenshot.
func (b *browser) refusal(name, text string) {
	b.t.Helper()
	b.wantText(".error", text)
	b.do(chromedp.WaitVisible(chromedp.CSS(`a.button`)))
	b.screen(name)
}

// forget drops the problems reported for answers of these statuses to path: the test provoked
// them, a number of times it could not know in advance.
func (b *browser) forget(path string, statuses ...int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		drop := false
		for _, st := range statuses {
			if (strings.Contains(p, fmt.Sprintf("status of %d ", st)) && strings.HasSuffix(strings.TrimSpace(p), path)) ||
				(strings.HasPrefix(p, fmt.Sprintf("HTTP %d ", st)) && urlPath(strings.TrimPrefix(p, fmt.Sprintf("HTTP %d ", st))) == path) {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, p)
		}
	}
	b.problems = kept
}
