package bootstrap_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestDashboardMoneyInABrowser places and pays orders on the memory adapters, refunds one,
// and reads the dashboard's money in headless Chromium in English and in Chinese, in the
// console's zone (Asia/Shanghai): the cards match the orders to the cent, the server's chart is
// an image that loaded, the low-stock product is listed, and the page fits a 390 px phone.
func TestDashboardMoneyInABrowser(t *testing.T) {
	chromium, c := browserService(t, "CARDSHOP_CONSOLE_TIMEZONE=Asia/Shanghai")
	c.want(201, "POST", "/admin/products", adminToken,
		`{"id":31,"name":"Money 31","price":1999,"max_per_order":5,"low_stock_threshold":5}`, nil)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":32,"name":"礼品卡 32","price":1234,"max_per_order":5}`, nil)
	c.want(200, "POST", "/admin/products/31/codes", adminToken, "M31-CODE-0001\nM31-CODE-0002\nM31-CODE-0003\nM31-CODE-0004\nM31-CODE-0005\nM31-CODE-0006\nM31-CODE-0007\n", nil)
	c.want(200, "POST", "/admin/products/32/codes", adminToken, "M32-CODE-0001\nM32-CODE-0002\n", nil)
	// The stock watch (every second) sees both products above their threshold first.
	time.Sleep(1500 * time.Millisecond)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"mona"}`, &tok)
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	order := func(product, qty int, key string) string {
		var o struct {
			OrderNo string `json:"order_no"`
		}
		c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, product, qty), &o, "Idempotency-Key", key)
		var out, errOut bytes.Buffer
		if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", o.OrderNo}, &out, &errOut); code != 0 {
			t.Fatalf("pay exited %d: %s %s", code, out.String(), errOut.String())
		}
		return o.OrderNo
	}
	order(31, 2, "money-key-0001")             // 39.98
	order(31, 1, "money-key-0002")             // 19.99
	refunded := order(32, 1, "money-key-0003") // 12.34, refunded
	order(32, 1, "money-key-0004")             // 12.34
	c.want(200, "POST", "/admin/orders/"+refunded+"/refund", adminToken, `{"reason":"test"}`, nil)
	// Paid 4 orders: 39.98 + 19.99 + 12.34 + 12.34 = 84.65; refunded 12.34; net 72.31.
	revenue, refunds, net := domain.Money(3998+1999+1234+1234), domain.Money(1234), domain.Money(3998+1999+1234)
	cur := domain.Currency{Code: "CNY", Exponent: 2}
	// The low-stock watch runs every second: 4 codes of product 31 are left, under its 5.
	time.Sleep(1500 * time.Millisecond)

	// The threshold's crossing raised one low_stock alert, in the alert log operators read.
	var alerts struct {
		Alerts []struct {
			Kind      string `json:"kind"`
			ProductID int64  `json:"product_id"`
			Count     int64  `json:"count"`
		} `json:"alerts"`
	}
	c.want(200, "GET", "/admin/alerts?kind=low_stock", adminToken, "", &alerts)
	if len(alerts.Alerts) != 1 || alerts.Alerts[0].ProductID != 31 || alerts.Alerts[0].Count != 1 {
		t.Fatalf("low_stock alerts %+v, want one for product 31", alerts.Alerts)
	}

	b := newBrowser(t, chromium, c.base, screenshotDir(t))
	b.do(chromedp.Navigate(c.base + "/console/login"))
	b.submit(chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	for _, lang := range []struct{ code, today, lowStock, shot string }{
		{"en", "Today", "4 left (threshold 5)", "dashboard-money"},
		{"zh-CN", "今天", "剩余 4（阈值 5）", "dashboard-money-zh"},
	} {
		b.submit(chromedp.Navigate(c.base + "/console/lang?to=" + lang.code + "&back=%2Fconsole%2Fdashboard"))
		b.wantPath("/console/dashboard")
		for _, period := range []string{"today", "7d", "30d"} {
			card := `a[data-period="` + period + `"] `
			b.wantText(card+`[data-money="paid"]`, "4")
			b.wantText(card+`[data-money="revenue"]`, cur.Format(revenue))
			b.wantText(card+`[data-money="refunded"]`, cur.Format(refunds))
			b.wantText(card+`[data-money="net"]`, cur.Format(net))
		}
		b.wantText(`a[data-period="today"] h3`, lang.today)
		loaded, err := run(b, chromedp.Evaluate[[]int](`(function(){var i=document.getElementById("revenue-chart");return [i.complete?1:0, i.naturalWidth];})()`))
		if err != nil || loaded[0] != 1 || loaded[1] == 0 {
			t.Fatalf("the revenue chart did not load: %v, %v", loaded, err)
		}
		b.wantText(`#low-stock li[data-product="31"]`, lang.lowStock)
		if n, err := run(b, chromedp.Evaluate[int](`document.querySelectorAll("#low-stock li").length`)); err != nil || n != 1 {
			t.Fatalf("the low-stock list has %d products (%v), want product 31 alone", n, err)
		}
		b.screen(lang.shot)
		// The 7 days' chart, by day, loads too.
		b.submit(chromedp.Click(chromedp.CSS(`a[data-period="7d"]`)))
		b.wantText(`a[data-period="7d"][aria-current] [data-money="revenue"]`, cur.Format(revenue))
		b.fits("dashboard money 7 days")
		b.submit(chromedp.Navigate(c.base + "/console/exports"))
		b.screen("exports-" + lang.code)
		b.submit(chromedp.Navigate(c.base + "/console/dashboard"))
	}
	b.checkClean()
	if got, err := run(b, chromedp.Text(chromedp.CSS(`#money-products`))); err != nil || !strings.Contains(got, "礼品卡 32") {
		t.Fatalf("the products' money %q, %v", got, err)
	}
}
