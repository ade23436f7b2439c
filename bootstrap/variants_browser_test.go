package bootstrap_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"cardshop/bootstrap"
)

// TestVariantsInABrowser drives a variant group in headless Chromium on a 390 px phone in
// Chinese and on a desktop in English: the catalogue shows the group as one card, its page
// has the picker, picking another variant is a plain link (no script), and the quantity input
// starts at the variant's minimum. Every page must fit the window and raise no page error (a
// CSP violation included). With SHOP_SCREENSHOTS=dir it writes docs/storefront/variants-*.png.
func TestVariantsInABrowser(t *testing.T) {
	chromium := needChromium(t)
	addr := freeAddr(t)
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_PUBLIC_URL=http://"+addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = addr
	c := runService(t, cfg, io.Discard)
	for i, v := range []struct{ label, name string }{{"50", "Steam 充值卡 50 元"}, {"100", "Steam 充值卡 100 元"}, {"200", "Steam 充值卡 200 元"}} {
		id := 900 + i
		c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":%q,"price":%d,"min_per_order":%d,`+
			`"max_per_order":5,"group":"Steam 充值卡 · Steam card","variant":%q}`, id, v.name, 5000*(1<<i), 1+i, v.label), nil)
		if i < 2 {
			codes := make([]string, 6)
			for j := range codes {
				codes[j] = fmt.Sprintf("VAR-%d-%02d", id, j)
			}
			c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", id), adminToken, strings.Join(codes, "\n"), nil)
		}
	}
	shots := shopScreenshotDir(t)
	for _, tc := range []struct {
		lang, device, pick string
		width, height      int64
	}{
		{"zh-CN", "phone", "选择规格", 390, 844},
		{"en", "desktop", "Choose an option", browserWidth, browserHeight},
	} {
		t.Run(tc.lang+"-"+tc.device, func(t *testing.T) {
			b := newSizedBrowser(t, chromium, c.base, shots, tc.width, tc.height)
			suffix := "-" + strings.SplitN(tc.lang, "-", 2)[0] + "-" + tc.device
			b.do(chromedp.Navigate(c.base + "/lang?to=" + tc.lang + "&back=%2F"))
			b.wantPath("/")
			b.wantText("main", "Steam card")
			if n, err := evalInt(b, `document.querySelectorAll('.item').length`); err != nil || n != 1 {
				t.Fatalf("%d catalogue cards, want 1 (the group): %v", n, err)
			}
			b.checkWatcherSeesCSP()
			b.screen("variants-catalogue" + suffix)
			b.submit(chromedp.Click(chromedp.CSS(`a[href="/p/900"]`)))
			b.wantText(".picker", tc.pick)
			b.wantText(`.variant[aria-current="page"]`, "50")
			b.submit(chromedp.Click(chromedp.CSS(`.variant[href="/p/901"]`)))
			b.wantPath("/p/901")
			b.wantText(`.variant[aria-current="page"]`, "100")
			b.wantText("h2", "Steam 充值卡 100 元")
			if v, err := run(b, chromedp.Evaluate[string](`document.querySelector('input[name=qty]').value`)); err != nil || v != "2" {
				t.Fatalf("the quantity input starts at %q, want the minimum 2: %v", v, err)
			}
			b.screen("variants-product" + suffix)
		})
	}
}

func evalInt(b *browser, js string) (int, error) { return run(b, chromedp.Evaluate[int](js)) }
