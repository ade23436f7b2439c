package bootstrap_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSupportScreensInABrowser drives the Operators screen and the manual payment confirmation
// (补单) in a real headless Chromium, in English and in Chinese, on the memory adapters with
// the dev provider: an admin creates an operator (its token shown once), changes its role and
// gives it a new token; then confirms a PENDING order by hand with a reference the provider does
// not know (refused by the provider's query), overrides the refusal with a reason (the order is
// PAID), and tries the same reference on another order (refused). Every page fits a 390 px
// wide phone; no page reports a script error or a CSP violation. With CONSOLE_SCREENSHOTS set
// it writes operators.png and manual-confirm.png (English) and their -zh twins.
func TestSupportScreensInABrowser(t *testing.T) {
	chromium, c := browserService(t, "CARDSHOP_DEV_PAYMENTS=true")
	c.want(201, "POST", "/admin/products", adminToken, `{"id":31,"name":"Gift card 31","price":1000,"max_per_order":2}`, nil)
	c.want(200, "POST", "/admin/products/31/codes", adminToken, "SUP-0001\nSUP-0002\nSUP-0003\nSUP-0004\nSUP-0005\n", nil)
	shots := screenshotDir(t)

	for i, lang := range []struct {
		code, suffix                             string
		created, unpaid, used, paid, operatorsH1 string
	}{
		{"en", "", "Operator created.", "The provider does not confirm this payment", "already paid another order",
			"The order is marked paid", "Operators"},
		{"zh-CN", "-zh", "操作员已创建。", "支付渠道未确认这笔付款", "已用于另一笔订单", "订单已标记为已付款", "操作员"},
	} {
		t.Run(lang.code, func(t *testing.T) {
			var admin, buyer struct {
				Token string `json:"token"`
			}
			c.want(201, "POST", "/admin/operators", adminToken, fmt.Sprintf(`{"name":"boss%d","role":"admin"}`, i), &admin)
			c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"buyer-%d"}`, i), &buyer)
			var a, b struct {
				OrderNo string `json:"order_no"`
			}
			c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":31,"qty":1}`, &a, "Idempotency-Key", fmt.Sprintf("sup-key-%d-a", i))
			c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":31,"qty":1}`, &b, "Idempotency-Key", fmt.Sprintf("sup-key-%d-b", i))

			br := newBrowser(t, chromium, c.base, shots)
			br.do(chromedp.Navigate(c.base + "/console/lang?to=" + lang.code + "&back=/console/login"))
			br.submit(chromedp.SendKeys(chromedp.ID("token"), admin.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
			br.wantPath("/console")

			// Operators: create (the token shown once), change the role, a new token.
			br.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/operators"]`)))
			br.wantText("h1", lang.operatorsH1)
			clerk := fmt.Sprintf("clerk%d", i)
			br.do(chromedp.SendKeys(chromedp.ID("name"), clerk), chromedp.SetValue(chromedp.ID("role"), "operator"))
			br.submit(chromedp.Click(chromedp.CSS(`main form[action="/console/operators"] button[type=submit]`)))
			br.wantText(".notice", lang.created)
			br.wantText("#new-token", clerk+".")
			br.screen("operators" + lang.suffix)
			row := "#op-" + clerk
			br.do(chromedp.SetValue(chromedp.CSS(row+` select[name=role]`), "viewer"))
			br.submit(chromedp.Click(chromedp.CSS(row + ` form[action$="/role"] button`)))
			sel, err := run(br, chromedp.Evaluate[string](`document.querySelector("`+row+` select[name=role]").value`))
			if err != nil || sel != "viewer" {
				t.Fatalf("the role after the change: %q, %v", sel, err)
			}
			br.submit(chromedp.Click(chromedp.CSS(row + ` form[action$="/rotate"] button`)))
			br.wantText("#new-token", clerk+".")
			br.check("operators-rotated" + lang.suffix)

			// The manual confirmation: refused by the provider's query, then overridden.
			br.do(chromedp.Navigate(c.base + "/console/orders/" + a.OrderNo))
			br.check("order-pending" + lang.suffix)
			br.submit(chromedp.Click(chromedp.CSS(`main a[href$="/confirm-payment"]`)))
			ref := fmt.Sprintf("BANK-%d-001", i)
			br.do(chromedp.SendKeys(chromedp.ID("provider"), "dev"), chromedp.SendKeys(chromedp.ID("reference"), ref),
				chromedp.SendKeys(chromedp.ID("note"), "screenshot from the buyer"))
			path := "/console/orders/" + a.OrderNo + "/confirm-payment"
			br.expect(409, path)
			br.submit(chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
			br.wantText(".error", lang.unpaid)
			br.do(chromedp.SendKeys(chromedp.ID("override"), "the money is on the bank statement"))
			br.screen("manual-confirm" + lang.suffix)
			br.submit(chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
			br.wantText(".notice", lang.paid)
			br.wantText("main", ref)
			br.check("order-confirmed" + lang.suffix)
			// The Fulfil confirmation's page (its layout, whatever the order's state) fits a phone.
			br.do(chromedp.Navigate(c.base + "/console/orders/" + a.OrderNo + "/fulfil"))
			br.check("fulfil-confirm" + lang.suffix)

			// The same reference on another order is refused.
			br.do(chromedp.Navigate(c.base + "/console/orders/" + b.OrderNo + "/confirm-payment"))
			br.do(chromedp.SendKeys(chromedp.ID("provider"), "dev"), chromedp.SendKeys(chromedp.ID("reference"), ref),
				chromedp.SendKeys(chromedp.ID("override"), "again"))
			br.expect(409, "/console/orders/"+b.OrderNo+"/confirm-payment")
			br.submit(chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
			br.wantText(".error", lang.used)
			br.check("manual-refused" + lang.suffix)
			br.checkClean()
		})
	}
}

// check is screen without a screenshot: the page must fit a desktop's and a phone's width.
func (b *browser) check(name string) {
	b.t.Helper()
	shots := b.shots
	b.shots = ""
	defer func() { b.shots = shots }()
	b.screen(name)
}
