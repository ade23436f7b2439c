package bootstrap_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"cardshop/adapters/lab/mailpit"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// shopTexts are what the shop's pages say in one language, as the test looks for them.
type shopTexts struct {
	lang, catalogue, startsIn, confirm, keep, codes, lookupFailed, order, amount string
	mailSays, review                                                             string // in the order's e-mail; the review page's title
	coupon                                                                       string // a coupon code the buyer types ("" none): 5.00 off
	// description is the product's, as a shop in that language writes one: lines, paragraphs
	// and a long link that must wrap on a phone rather than scroll.
	description string
}

var shopLangs = map[string]shopTexts{
	"zh-CN": {lang: "zh-CN", catalogue: "商品列表", startsIn: "距离开售还有", confirm: "下单成功", keep: "此密钥只显示这一次",
		codes: "您的卡密", lookupFailed: "没有找到匹配的订单", order: "我的订单", amount: "95.00 CNY",
		mailSays: "感谢您的购买！我们已收到您的付款", review: "确认订单", coupon: "xin-5",
		description: "可在官方商城购买游戏、应用和会员服务的礼品卡，面值 50 元，长期有效。\n" +
			"兑换：打开商城 → 我的 → 兑换礼品卡，输入卡密即可到账。\n\n" +
			"每个邮箱最多购买 4 张。卡密会发到您的邮箱，也可以在本店用订单号、邮箱和查询密钥找回。\n\n" +
			"兑换说明：https://store.example.com/help/redeem-gift-card-step-by-step-guide-for-new-customers"},
	"en": {lang: "en", catalogue: "Products", startsIn: "The sale starts in", confirm: "Order placed",
		keep: "This key is shown only once", codes: "Your codes", lookupFailed: "No order matches these details", order: "Your order",
		amount: "100.00 CNY", mailSays: "Thank you for your purchase. Your payment has been received", review: "Check your order",
		description: "A gift card of 50 CNY for games, apps and memberships in the official store. It never expires.\n" +
			"To redeem: open the store → Me → Redeem a gift card, and enter the code.\n\n" +
			"Up to 4 per e-mail address. Your codes are e-mailed to you, and this shop finds them again by order number, " +
			"e-mail and access key.\n\nHow to redeem: https://store.example.com/help/redeem-gift-card-step-by-step-guide-for-new-customers"},
}

// TestShopInABrowser drives the built-in shop in a real headless Chromium on the memory
// adapters, as a buyer on a 390×844 phone in Chinese and on a desktop in English: the
// language switch, the catalogue, a product whose countdown turns into the order form without
// a reload, an order of 2 codes (on the phone with a coupon of 5.00 off, shown on the review
// page and paid discounted) with the access secret on the confirmation page, paying (on the
// phone through the dev provider's page, on the desktop through Alipay's QR code against its
// simulator), the order page with the 2 codes, then the lookup
// with a wrong secret (refused) and the right one (the order page). Every page must fit the
// window's width, and any page error (a CSP violation included) or unexpected answer of 400 or
// more fails the test. With SHOP_SCREENSHOTS=dir (`make storefront-screenshots`) it writes a
// PNG of every page in both languages, phone and desktop.
func TestShopInABrowser(t *testing.T) {
	chromium := needChromium(t)
	addr := freeAddr(t)
	// The buyers' e-mail goes through a real SMTP server, a Mailpit of this test's own.
	mp := mailpit.Start(t, mailpit.Options{})
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_PUBLIC_URL=http://"+addr,
		"CARDSHOP_SMTP_ADDR="+mp.SMTPAddr, "CARDSHOP_SMTP_FROM=Card shop <shop@cards.example>", "CARDSHOP_SMTP_TLS=none"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = addr
	sim := withAlipayQR(t, &cfg)
	c := runService(t, cfg, io.Discard)
	shots := shopScreenshotDir(t)
	for i, run := range []struct {
		lang, device  string
		width, height int64
	}{
		{"zh-CN", "phone", 390, 844},
		{"en", "desktop", browserWidth, browserHeight},
		{"zh-CN", "desktop", browserWidth, browserHeight},
		{"en", "phone", 390, 844},
	} {
		t.Run(run.lang+"-"+run.device, func(t *testing.T) {
			browseShop(t, chromium, c, sim, mp, shopLangs[run.lang], 700+i, run.width, run.height, shots, run.device)
		})
	}
}

// browseShop is one buyer's walk through the shop in a new browser; product id is made for it.
//
// On a phone the buyer pays through the dev provider's page and comes back to the order page by
// its link; on a desktop through Alipay's QR code, and the QR page moves on to the order page by
// itself once the simulator reports the payment.
func browseShop(t *testing.T, chromium string, c client, sim *alipaysim.Sim, mp *mailpit.Server, txt shopTexts, id int, width, height int64, shots, device string) {
	name := fmt.Sprintf("礼品卡 Gift card %d", id)
	startsAt := time.Now().Add(9 * time.Second).UTC().Format(time.RFC3339Nano)
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":%q,"description":%q,"price":5000,"max_per_order":5,`+
		`"tiers":[{"min_qty":3,"unit_price":4800}],"buyer_limit":4,"starts_at":%q}`, id, name, txt.description, startsAt), nil)
	firstLine, _, _ := strings.Cut(txt.description, "\n")
	codes := make([]string, 5)
	for i := range codes {
		codes[i] = fmt.Sprintf("SHOP-%d-%02d", id, i)
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", id), adminToken, strings.Join(codes, "\n"), nil)
	if txt.coupon != "" {
		c.want(201, "POST", "/admin/coupons", adminToken, fmt.Sprintf(`{"code":"%s-%d","kind":"fixed","value":500,"products":[%d]}`,
			txt.coupon, id, id), nil)
	}

	b := newSizedBrowser(t, chromium, c.base, shots, width, height)
	suffix := "-" + strings.ToLower(strings.SplitN(txt.lang, "-", 2)[0]) + "-" + device
	b.do(chromedp.Navigate(c.base + "/lang?to=" + txt.lang + "&back=%2F"))
	b.wantPath("/")
	b.wantText("h1", txt.catalogue)
	b.wantText("main", name)
	b.checkWatcherSeesCSP()
	// The card shows the description's first line (cut when long).
	b.wantText(fmt.Sprintf(`a[href="/p/%d"] + .excerpt`, id), string([]rune(firstLine)[:20]))
	b.screen("catalogue" + suffix)

	// The product: a countdown, which turns into the order form without a reload.
	b.submit(chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/p/%d"]`, id))))
	b.wantText("h1", name)
	b.wantText("#countdown", txt.startsIn)
	b.wantText(".description", firstLine)
	b.wantText(".description", "https://store.example.com/help/redeem")
	b.screen("product-upcoming" + suffix)
	b.do(chromedp.WaitVisible(chromedp.ID("checkout")))
	b.wantPath(fmt.Sprintf("/p/%d", id))
	email := fmt.Sprintf("buyer%d@example.com", id)
	b.do(chromedp.Clear(chromedp.CSS(`input[name=qty]`)), chromedp.SendKeys(chromedp.CSS(`input[name=qty]`), "2"),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email))
	if txt.coupon != "" {
		b.do(chromedp.SendKeys(chromedp.CSS(`input[name=coupon]`), fmt.Sprintf("%s-%d", txt.coupon, id)))
	}
	b.screen("product" + suffix)
	b.submit(chromedp.Click(chromedp.CSS(`#checkout button[type=submit]`)))
	// The review: the order priced by the shop, confirmed with its own form.
	b.wantText("h1", txt.review)
	b.wantText(".review .amount", txt.amount)
	if txt.coupon != "" {
		b.wantText(".review .discount", strings.ToUpper(txt.coupon))
	}
	b.screen("review" + suffix)
	b.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
	b.wantText("h1", txt.confirm)
	b.wantText(".secret", txt.keep)
	secret := b.text(".secret-value code")
	no := b.text(".summary code")
	b.screen("confirm" + suffix)

	if device == "phone" {
		// Paying through the dev provider's page, and back to the order page by its link.
		b.do(chromedp.Click(chromedp.CSS(`form.pay input[value=dev]`)))
		b.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
		b.wantPath("/dev/pay/" + no)
		b.submit(chromedp.Click(chromedp.CSS(`button.pay`)))
		b.submit(chromedp.Click(chromedp.CSS(`a.back`)))
		b.wantPath("/orders/" + no)
	} else {
		// Paying by Alipay's QR code: the page follows the order and moves on by itself.
		b.do(chromedp.Click(chromedp.CSS(`form.pay input[value=alipay]`)))
		b.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
		b.wantPath("/orders/" + no + "/pay/alipay")
		b.wantText(".qrpay", txt.amount)
		b.screen("qr" + suffix)
		if err := sim.Scan(no); err != nil {
			t.Fatal(err)
		}
		if err := sim.Pay(context.Background(), no); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(stepTimeout)
		for b.path() != "/orders/"+no {
			if time.Now().After(deadline) {
				t.Fatalf("the QR page did not move on to the order page once paid (at %s)", b.path())
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.do(chromedp.WaitVisible(chromedp.CSS(".codes")))
	}
	b.wantText("h1", txt.order)
	b.wantText(".codes", txt.codes)
	shown := b.text(".codes ol")
	n := 0
	for _, code := range codes {
		if strings.Contains(shown, code) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the order page shows %d of the product's codes, want 2: %q", n, shown)
	}
	b.screen("order-paid" + suffix)
	// The e-mail: one, to the buyer, in the buyer's language, with exactly the codes the order
	// page shows.
	m := mailTo(t, mp, email)
	for _, code := range codes {
		if strings.Contains(shown, code) != strings.Contains(m.Text, code) {
			t.Errorf("code %s: on the order page %v, in the e-mail %v", code, strings.Contains(shown, code), strings.Contains(m.Text, code))
		}
	}
	if !strings.Contains(m.Text, no) || !strings.Contains(m.Text, txt.mailSays) {
		t.Errorf("the e-mail does not name order %s in %s (%q): %q", no, txt.lang, txt.mailSays, m.Text)
	}

	// The lookup: a wrong secret is refused, the right one opens the order.
	b.do(chromedp.Navigate(c.base + "/lookup"))
	b.screen("lookup" + suffix)
	fill := func(secret string) {
		b.do(chromedp.SendKeys(chromedp.CSS(`input[name=order_no]`), no), chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
			chromedp.SendKeys(chromedp.CSS(`input[name=secret]`), secret))
	}
	fill(strings.ToUpper(secret[:4]) + secret[4:] + "x")
	b.expect(404, "/lookup")
	b.submit(chromedp.Click(chromedp.CSS(`form.lookup button[type=submit]`)))
	b.wantText(".error", txt.lookupFailed)
	b.screen("lookup-failed" + suffix)
	fill(secret)
	b.submit(chromedp.Click(chromedp.CSS(`form.lookup button[type=submit]`)))
	b.wantPath("/orders/" + no)
	b.wantText(".codes", txt.codes)
	b.checkClean()
}

// text is the text of the first element of sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	got, err := run(b, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: %s: %v (at %s)", sel, err, b.path())
	}
	return strings.TrimSpace(got)
}

// shopScreenshotDir is $SHOP_SCREENSHOTS (relative to the repository's root), created; empty
// when unset, so a normal run writes no file.
func shopScreenshotDir(t *testing.T) string {
	dir := os.Getenv("SHOP_SCREENSHOTS")
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // go test runs in bootstrap/
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mailTo is the one e-mail Mailpit received for to, read in full; it waits for it a while (the
// mail relay sends it within a relay interval of the payment) and fails on none or several.
func mailTo(t *testing.T, mp *mailpit.Server, to string) mailpit.Message {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(stepTimeout)
	for {
		ms, err := mp.Messages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mine []mailpit.Summary
		for _, m := range ms {
			for _, a := range m.To {
				if strings.EqualFold(a.Address, to) {
					mine = append(mine, m)
				}
			}
		}
		switch {
		case len(mine) > 1:
			t.Fatalf("%d e-mails to %s, want 1", len(mine), to)
		case len(mine) == 1:
			m, err := mp.Message(ctx, mine[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			return m
		case time.Now().After(deadline):
			t.Fatalf("no e-mail to %s within %s", to, stepTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// withAlipayQR configures Alipay in precreate mode (a QR code to scan) against a simulator of
// the test's own, which notifies the service at its public URL; it returns the simulator.
func withAlipayQR(t *testing.T, cfg *bootstrap.Config) *alipaysim.Sim {
	t.Helper()
	keys := testPayKeys()
	sim, err := alipaysim.New(alipaysim.Config{MerchantKey: &keys.alipayApp.PublicKey, AlipayKey: keys.alipay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	cfg.AlipayURL, cfg.AlipayAppID, cfg.AlipaySellerID = sim.URL(), sim.AppID(), sim.SellerID()
	cfg.AlipayPrivateKey, cfg.AlipayPublicKey, cfg.AlipayMethod = domain.Secret(privateKeyPEM(keys.alipayApp)), sim.PublicKeyPEM(), "precreate"
	return sim
}
