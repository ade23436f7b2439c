package bootstrap_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestCouponsInABrowser drives the Coupons screen in headless Chromium, in English and in
// Chinese: an operator creates a coupon for two products from the form (a percentage with a
// per-product and a per-buyer limit and an end; an amount off with a minimum), the list shows
// it with its products, uses ("used / limit": a buyer's order with the coupon counts 1 on its
// product), validity and status, and the operator disables and enables it. Every screen fits a
// 390 px wide phone. With CONSOLE_SCREENSHOTS=dir the page is written as coupons.png (English,
// desktop), coupons-zh.png and coupons-zh-phone.png (Chinese, 390 px).
func TestCouponsInABrowser(t *testing.T) {
	chromium, c := browserService(t)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7001,"name":"Steam 50","price":5000,"max_per_order":5}`, nil)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7002,"name":"Xbox Game Pass 3 个月","price":9900,"max_per_order":5}`, nil)
	c.want(200, "POST", "/admin/products/7001/codes", adminToken, "CPN-BROWSER-0001\nCPN-BROWSER-0002\nCPN-BROWSER-0003", nil)
	var buyer struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"coupon-buyer"}`, &buyer)
	var op struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/operators", adminToken, `{"name":"couponist","role":"operator"}`, &op)

	b := newBrowser(t, chromium, c.base, screenshotDir(t))
	b.do(chromedp.Navigate(c.base + "/console/login"))
	b.submit(chromedp.SendKeys(chromedp.ID("token"), op.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.wantPath("/console")

	for _, lang := range []struct {
		tag, shot, title, code, kind, value, minAmount string
		created, row, disabled, enabled                string
	}{
		{"en", "coupons", "Coupons", "spring-10", "percent", "10", "", "Coupon SPRING-10 created.", "10% off",
			"Coupon SPRING-10 disabled.", "Coupon SPRING-10 enabled."},
		{"zh-CN", "coupons-zh", "优惠券", "chun-5", "fixed", "5.00", "30", "已创建优惠券 CHUN-5。", "减 5.00 CNY",
			"已停用优惠券 CHUN-5。", "已启用优惠券 CHUN-5。"},
	} {
		t.Run(lang.tag, func(t *testing.T) {
			b.t = t
			b.submit(chromedp.Navigate(c.base + "/console/lang?to=" + lang.tag + "&back=/console/coupons"))
			b.wantPath("/console/coupons")
			b.wantText("h1", lang.title)
			b.do(chromedp.SendKeys(chromedp.ID("code"), lang.code), chromedp.SetValue(chromedp.ID("kind"), lang.kind),
				chromedp.SendKeys(chromedp.ID("value"), lang.value),
				chromedp.Click(chromedp.CSS(`input[name=products][value="7001"]`)),
				chromedp.Click(chromedp.CSS(`input[name=products][value="7002"]`)),
				chromedp.SendKeys(chromedp.ID("uses_per_product"), "100"), chromedp.SendKeys(chromedp.ID("uses_per_buyer"), "1"),
				chromedp.SetValue(chromedp.ID("valid_until"), "2031-12-31T23:59"))
			if lang.minAmount != "" {
				b.do(chromedp.SendKeys(chromedp.ID("min_amount"), lang.minAmount))
			}
			b.submit(chromedp.Click(chromedp.CSS(`form.card button[type=submit]`)))
			b.wantText(".notice", lang.created)
			code := strings.ToUpper(lang.code)
			row := "#coupon-" + code
			// A buyer's order with the coupon: one use of it on Steam 50.
			var o struct {
				OrderNo  string `json:"order_no"`
				Coupon   string `json:"coupon"`
				Discount int64  `json:"discount"`
			}
			c.want(201, "POST", "/api/order", buyer.Token, fmt.Sprintf(`{"product_id":7001,"qty":1,"coupon":%q}`, lang.code), &o,
				"Idempotency-Key", "coupon-browser-"+lang.tag)
			if o.Coupon != code || o.Discount <= 0 {
				t.Fatalf("order with %s: %+v", code, o)
			}
			b.submit(chromedp.Navigate(c.base + "/console/coupons"))
			b.wantText(row, lang.row)
			b.wantText(row, "Steam 50")
			b.wantText(row, "1 / 100")
			b.wantText(row, "2031-12-31")

			b.submit(chromedp.Click(chromedp.CSS(row + ` form[action$="/disable"] button`)))
			b.wantText(".notice", lang.disabled)
			b.wantText(row+` form[action$="/enable"] button`, "")
			b.screen(lang.shot)
			if lang.tag != "en" {
				b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight))
				b.fits(lang.shot + " (phone)")
				b.shot(lang.shot + "-phone")
				b.do(chromedp.EmulateViewport(b.width, b.height))
			}
			b.submit(chromedp.Click(chromedp.CSS(row + ` form[action$="/enable"] button`)))
			b.wantText(".notice", lang.enabled)

			// The order's page shows its coupon and discount above the amount, on a phone too.
			b.submit(chromedp.Navigate(c.base + "/console/orders/" + o.OrderNo))
			b.wantText("main", code)
			b.screen("order-coupon" + strings.TrimPrefix(lang.shot, "coupons"))
			b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight))
			b.fits("order-coupon (phone)")
			b.shot("order-coupon" + strings.TrimPrefix(lang.shot, "coupons") + "-phone")
			b.do(chromedp.EmulateViewport(b.width, b.height))
			b.checkClean()
		})
	}
}
