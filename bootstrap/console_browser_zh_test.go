package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"cardshop/bootstrap"
)

// browseConsoleInChinese walks the console of c once more, in Chinese: a new browser (which
// asks for English, as the test's Chromium does) picks 中文 with the switch on the login page,
// logs in and opens every screen, each in Chinese (the page's language, its heading, the
// menu) and each fitting a 390 px phone; then the switch takes it back to English. pid and
// orderNo are the product and the refunded order of browseConsole's walk. With screenshots
// asked for, each screen is written as <name>-zh.png beside the English ones.
func browseConsoleInChinese(t *testing.T, chromium string, c client, shots, pid, orderNo string) {
	b := newBrowser(t, chromium, c.base, shots)
	var op struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/operators", adminToken, `{"name":"li","role":"admin"}`, &op)
	product := "/console/products/" + pid

	b.do(chromedp.Navigate(c.base + "/console"))
	b.wantPath("/console/login")
	b.wantLang("en")
	b.wantText("h1", "Log in")
	// The switch, on the login page already: the page comes back in Chinese.
	b.submit(chromedp.Click(chromedp.CSS(`nav.lang a[href*="to=zh-CN"]`)))
	b.wantPath("/console/login")
	b.zhScreen("login", "登录", false)
	b.submit(chromedp.SendKeys(chromedp.ID("token"), op.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.wantPath("/console")
	b.wantText("main", "当前登录：li，角色：管理员。")
	b.zhScreen("overview", "概览", true)

	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/products"]`)))
	b.zhScreen("products", "商品", true)
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="` + product + `"]`)))
	b.wantText("main dl", "每单限购")
	b.zhScreen("product", "Gift card 50", true)
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="` + product + `/edit"]`)))
	b.zhScreen("product-form", "编辑商品 #"+pid, true)

	// An import in Chinese: its result counts in Chinese and names the reasons in Chinese.
	file := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(file, []byte("# 第二批\nBROWSER-ZH-"+pid+"-01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.submit(chromedp.Navigate(c.base + product + "/codes"))
	b.do(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	b.zhScreen("codes", "Gift card 50 的卡密", true)
	b.submit(chromedp.Click(chromedp.CSS(`main form[enctype] button[type=submit]`)))
	b.wantText(".notice", "导入完成：新增 1 个卡密，1 行未导入。")
	if rows := b.tableRows(); len(rows) != 1 || rows[0][0] != "1" || rows[0][1] != "注释" {
		t.Fatalf("the import's lines not imported, in Chinese: %q", rows)
	}
	b.zhScreen("import-result", "导入卡密：Gift card 50", true)

	// The void's confirmation (cancelled: the product is on sale).
	b.submit(chromedp.Navigate(c.base + product + "/codes"))
	b.do(chromedp.SendKeys(chromedp.ID("codes"), "BROWSER-ZH-"+pid+"-01"), chromedp.SendKeys(chromedp.ID("void-reason"), "泄露"))
	b.submit(chromedp.Click(chromedp.CSS(`main button.danger`)))
	b.wantText("main", "即将作废商品「Gift card 50」")
	b.zhScreen("void-confirm", "确认：作废 Gift card 50 的卡密", true)
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="` + product + `/codes"]`)))

	b.submit(chromedp.Navigate(c.base + product + "/reconcile"))
	b.wantText("main", "所有核对项一致。")
	b.zhScreen("reconcile", "对账：Gift card 50", true)
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="` + product + `/repair"]`)))
	b.zhScreen("repair-confirm", "确认：修复 Gift card 50 的库存闸门", true)

	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/orders"]`)))
	b.zhScreen("orders", "", true)
	// The refunded order offers no second refund; a PAID one, placed and paid now, offers it,
	// and its confirmation says where its code and its money would go.
	b.submit(chromedp.Navigate(c.base + "/console/orders/" + orderNo))
	b.wantText("dl", "已退款")
	if n, err := run(b, chromedp.Evaluate[int](`document.querySelectorAll('main a[href$="/refund"]').length`)); err != nil || n != 0 {
		t.Fatalf("the refunded order's page offers a refund (%d links, %v)", n, err)
	}
	b.check("order-refunded-zh")
	var buyer struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"browser-buyer-zh-`+pid+`"}`, &buyer)
	var paid orderBody
	c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":`+pid+`,"qty":1}`, &paid, "Idempotency-Key", "browser-zh-"+pid)
	var out, errOut strings.Builder
	if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", paid.OrderNo}, &out, &errOut); code != 0 {
		t.Fatalf("pay exited %d: %s %s", code, out.String(), errOut.String())
	}
	b.submit(chromedp.Navigate(c.base + "/console/orders/" + paid.OrderNo))
	b.wantText("dl", "已支付")
	b.zhScreen("order", "", true)
	b.submit(chromedp.Click(chromedp.CSS(`main a[href$="/refund"]`)))
	b.wantText("#refund-money", "cardshop")
	b.zhScreen("refund-confirm", "确认：退款订单 "+paid.OrderNo, true)

	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/blocklist"]`)))
	b.wantText("main tbody", "邮箱域名")
	b.zhScreen("blocklist", "黑名单", true)
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/alerts"]`)))
	b.zhScreen("alerts", "", true)
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/dashboard"]`)))
	b.zhScreen("dashboard", "", true)

	// The settings: settings.js names the browser's zone in the page's words.
	b.submit(chromedp.Click(chromedp.CSS(`header a[href="/console/settings"]`)))
	b.wantText("#browser-zone", "使用本浏览器的时区（")
	b.zhScreen("settings", "设置", true)
	b.do(chromedp.Clear(chromedp.ID("time_zone")), chromedp.SendKeys(chromedp.ID("time_zone"), "Asia/Shanghai"))
	b.submit(chromedp.Click(chromedp.CSS(`main form button[type=submit]:not([id])`)))
	b.wantText(".notice", "已保存：时间按 Asia/Shanghai 显示。")

	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/audit"]`)))
	if rows := b.tableRows(); len(rows) == 0 || !strings.HasSuffix(rows[0][0], " CST") {
		t.Errorf("the audit log's times are not in the zone picked: %q", rows)
	}
	b.zhScreen("audit", "审计日志", true)

	b.expect(404, "/console/no-such-page")
	b.submit(chromedp.Navigate(c.base + "/console/no-such-page"))
	b.zhScreen("error", "出错了", true)

	// Back to English with the switch: the same page, in English, and it stays so.
	b.submit(chromedp.Navigate(c.base + "/console/audit"))
	b.submit(chromedp.Click(chromedp.CSS(`nav.lang a[href*="to=en"]`)))
	b.wantPath("/console/audit")
	b.wantLang("en")
	b.wantText("h1", "Audit log")
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/products"]`)))
	b.wantLang("en")
	b.wantText("h1", "Products")
	b.checkClean()
}

// wantLang fails unless the page's language (<html lang>) is lang.
func (b *browser) wantLang(lang string) {
	b.t.Helper()
	got, err := run(b, chromedp.Evaluate[string](`document.documentElement.lang`))
	if err != nil {
		b.t.Fatal(err)
	}
	if got != lang {
		b.t.Fatalf("%s is in %q, want %q", b.path(), got, lang)
	}
}

// zhScreen checks that the page is in Chinese — its language, its heading (when heading is
// not empty), the menu when loggedIn — and takes it as screen name-zh: it fits a 390 px phone.
func (b *browser) zhScreen(name, heading string, loggedIn bool) {
	b.t.Helper()
	b.wantLang("zh-CN")
	if heading != "" {
		b.wantText("h1", heading)
	}
	if loggedIn {
		nav, err := run(b, chromedp.Text(chromedp.CSS(`header.top`)))
		if err != nil {
			b.t.Fatal(err)
		}
		for _, w := range []string{"仪表盘", "商品", "订单", "审计日志", "退出登录"} {
			if !strings.Contains(nav, w) {
				b.t.Errorf("the menu of %s has no %q: %q", b.path(), w, nav)
			}
		}
		for _, w := range []string{"Dashboard", "Products", "Orders", "Audit log", "Log out"} {
			if strings.Contains(nav, w) {
				b.t.Errorf("the menu of %s shows English %q: %q", b.path(), w, nav)
			}
		}
	}
	b.screen(name + "-zh")
}
