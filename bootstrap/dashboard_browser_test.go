package bootstrap_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardInABrowser opens the live dashboard in headless Chromium during a small sale on
// the memory adapters: its script connects to the event stream under the console's CSP and
// the sold-out chart follows the sold-out answers, with no error or failed request in the page.
func TestDashboardInABrowser(t *testing.T) {
	chromium, c := browserService(t)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7,"name":"Flash 7","price":1000,"max_per_order":1}`, nil)
	c.want(200, "POST", "/admin/products/7/codes", adminToken, "FLASH-0001\n", nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"dana"}`, &tok)
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":7,"qty":1}`, nil, "Idempotency-Key", "dash-key-0000")

	b := newBrowser(t, chromium, c.base, screenshotDir(t))
	b.do(chromedp.Navigate(c.base + "/console/login"))
	b.submit(chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/dashboard"]`)))
	b.wantPath("/console/dashboard")
	b.wantText(`section[data-id="7"] [data-field="pending"]`, "1")
	waitText(t, b, "#dash-live", "Live:")

	// Sold-out answers for a few seconds: the chart shows them once their 5 s interval is over.
	last := `section[data-id="7"] [data-field="sold_out-last"]`
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		c.want(409, "POST", "/api/order", tok.Token, `{"product_id":7,"qty":1}`, nil, "Idempotency-Key", fmt.Sprintf("dash-key-%04d", i+1))
		got, err := run(b, chromedp.Text(chromedp.CSS(last)))
		if err == nil && got != "0/s" && got != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sold-out rate still reads %q (%v) after 20 s of sold-out answers", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	points, err := run(b, chromedp.Evaluate[string](`document.querySelector('figure[data-series="sold_out"] polyline').getAttribute("points")`))
	if err != nil || !strings.Contains(points, ",") {
		t.Fatalf("sold-out polyline points %q, %v", points, err)
	}
	b.screen("dashboard")
	b.checkClean()
}

// waitText waits up to 10 s for the element's text to contain want.
func waitText(t *testing.T, b *browser, sel, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if got, err = run(b, chromedp.Text(chromedp.CSS(sel))); err == nil && strings.Contains(got, want) {
			return
		}
	}
	t.Fatalf("%s reads %q, want %q", sel, got, want)
}
