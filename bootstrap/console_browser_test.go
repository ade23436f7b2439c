package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestConsoleInABrowser drives the operator console in a real headless Chromium, on the
// memory adapters and on the real ones: an operator logs in with a token made through the
// admin API, creates a product through the form, imports its codes through the codes screen
// (the import's page follows its progress and ends with the lines not imported), watches the
// live dashboard follow a sale made through the API (order, then payment) without a reload,
// finds the order by a search for its buyer and refunds it through the confirmation page,
// opens the alerts, picks a time zone, and finds those actions in the audit log at that
// zone's times. Any console error in a page (an uncaught exception, a
// console.error, a Content-Security-Policy violation), any failed request and any answer of
// 400 or more that the test did not provoke fails it.
//
// Chromium is Debian's (`make services` installs it); without it the test is skipped, or fails
// under CI=true. With CONSOLE_SCREENSHOTS=dir (`make console-screenshots`) the memory run
// writes a PNG of each screen there, for the README.
func TestConsoleInABrowser(t *testing.T) {
	chromium := needChromium(t)

	t.Run("memory", func(t *testing.T) {
		cfg, err := bootstrap.LoadConfig(env())
		if err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr = freeAddr(t)
		c := runService(t, cfg, io.Discard)
		pid, orderNo := browseConsole(t, chromium, c, screenshotDir(t), nil)
		browseConsoleInChinese(t, chromium, c, screenshotDir(t), pid, orderNo)
	})
	t.Run("real", func(t *testing.T) {
		s := cliService(t) // a fresh database of its own, dropped at the end with its Redis keys
		// The console's form leaves the id to AUTO_INCREMENT: start it at a random id, so that
		// the product's gate keys in the shared Redis meet no other test's.
		want := s.productID()
		browseConsole(t, chromium, s.c, "", func() domain.ProductID {
			if _, err := s.db.Exec(fmt.Sprintf("ALTER TABLE products AUTO_INCREMENT = %d", want)); err != nil {
				t.Fatal(err)
			}
			return want
		})
	})
}

// browseConsole is the operator's walk through the console of the service c in a new
// browser. beforeCreate, when not nil, runs before the product form is sent and returns the
// id the product must get. shots, when not empty, is the folder the screenshots go to. It
// returns the id of the product it made and the number of the order it refunded.
func browseConsole(t *testing.T, chromium string, c client, shots string, beforeCreate func() domain.ProductID) (string, string) {
	b := newBrowser(t, chromium, c.base, shots)

	// An admin operator, made through the admin API with the shared token.
	var op struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/operators", adminToken, `{"name":"alice","role":"admin"}`, &op)

	// The console sends a browser without a session to the login page.
	b.do(chromedp.Navigate(c.base + "/console"))
	b.wantPath("/console/login")
	b.screen("login")
	// A wrong token is refused (401, on purpose) and says so.
	b.expect(401, "/console/login")
	b.submit(chromedp.SendKeys(chromedp.ID("token"), "alice.not-the-token"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.wantText(".error", "That token is not valid.")
	b.submit(chromedp.SendKeys(chromedp.ID("token"), op.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.wantPath("/console")
	b.wantText("main", "Logged in as alice, role admin.")
	b.wantText("main", "No products yet.")
	b.checkWatcherSeesCSP()

	// A product, created through the form.
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/products"]`)))
	b.wantText("h1", "Products")
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="/console/products/new"]`)))
	for _, f := range [][2]string{{"name", "Gift card 50"}, {"price", "50.00"}, {"max_per_order", "5"},
		{"low_stock_threshold", "3"}} {
		b.do(chromedp.Clear(chromedp.ID(f[0])), chromedp.SendKeys(chromedp.ID(f[0]), f[1]))
	}
	b.do(chromedp.SendKeys(chromedp.ID("tiers"), "3 48.00")) // empty on a new product
	b.screen("product-form")
	var wantID domain.ProductID
	if beforeCreate != nil {
		wantID = beforeCreate()
	}
	b.submit(chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.wantText("h1", "Gift card 50")
	loc := b.path()
	pid := strings.TrimPrefix(loc, "/console/products/")
	if pid == loc || pid == "" || (wantID != 0 && pid != fmt.Sprint(wantID)) {
		t.Fatalf("after the product form the browser is at %s, want /console/products/%v", loc, wantID)
	}

	// Codes, imported through the codes screen: a file of 10 codes, one of them twice and a
	// comment line; the import's page shows its progress, then the result with every line
	// not imported and why, and the codes screen counts them.
	codes := make([]string, 10)
	for i := range codes {
		codes[i] = fmt.Sprintf("BROWSER-%s-%02d", pid, i)
	}
	file := filepath.Join(t.TempDir(), "codes.txt")
	lines := append([]string{"# batch of the browser test"}, codes...)
	lines = append(lines, codes[3])
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="/console/products/` + pid + `/codes"]`)))
	b.wantPath("/console/products/" + pid + "/codes")
	b.do(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	b.screen("codes")
	b.submit(chromedp.Click(chromedp.CSS(`main form[enctype] button[type=submit]`)))
	if p := b.path(); !strings.HasPrefix(p, "/console/products/"+pid+"/imports/") {
		t.Fatalf("after the import form the browser is at %s, want the import's page", p)
	}
	// The page polls the job (import.js) and reloads itself with the result when it ends.
	b.wantText(".notice", "Imported: 10 codes added, 2 lines not imported.")
	if rows := b.tableRows(); len(rows) != 2 || rows[0][0] != "1" || rows[0][1] != "comment" ||
		rows[1][0] != "12" || rows[1][1] != "duplicate" {
		t.Fatalf("the import's lines not imported: %q", rows)
	}
	b.screen("import-result")
	b.submit(chromedp.Click(chromedp.CSS(`a.brand`)))
	b.waitRow("Gift card 50", "10", "0")
	// A small sale through the API while the live dashboard is open: an order of 2, paid. The
	// dashboard follows it without a reload (its event stream).
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/dashboard"]`)))
	b.wantPath("/console/dashboard")
	waitText(t, b, "#dash-live", "Live:")
	b.wantText(`section[data-id="`+pid+`"] [data-field="stock"]`, "10")
	var buyer struct {
		Token string `json:"token"`
	}
	buyerID := "browser-buyer-" + pid
	c.want(201, "POST", "/admin/tokens", op.Token, `{"buyer_id":"`+buyerID+`"}`, &buyer)
	var order orderBody
	c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":`+pid+`,"qty":2}`, &order, "Idempotency-Key", "browser-"+pid)
	waitText(t, b, `section[data-id="`+pid+`"] [data-field="pending"]`, "2")
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	var out, errOut strings.Builder
	if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", order.OrderNo}, &out, &errOut); code != 0 {
		t.Fatalf("pay exited %d: %s %s", code, out.String(), errOut.String())
	}
	waitText(t, b, `section[data-id="`+pid+`"] [data-field="paid"]`, "2")
	waitText(t, b, `section[data-id="`+pid+`"] [data-field="stock"]`, "8")
	waitText(t, b, `section[data-id="`+pid+`"] [data-field="success"]`, "100% of 1")
	b.screen("dashboard-sale")

	// The overview shows the sale: 8 left (of 10), 2 sold.
	b.submit(chromedp.Click(chromedp.CSS(`a.brand`)))
	b.waitRow("Gift card 50", "8", "2")
	b.screen("overview") // and overview-phone.png
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/products"]`)))
	b.waitRow("Gift card 50", "8", "2")
	b.screen("products")

	// The product's reconciliation: every check of the report, with its numbers.
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="/console/products/` + pid + `"]`)))
	b.submit(chromedp.Click(chromedp.CSS(`main a[href="/console/products/` + pid + `/reconcile"]`)))
	b.wantPath("/console/products/" + pid + "/reconcile")
	b.wantText("h1", "Reconcile Gift card 50")
	if checks := b.tableRows(); len(checks) == 0 || len(checks[0]) != 4 {
		t.Fatalf("the reconcile page's checks: %q", checks)
	}
	b.screen("reconcile")

	// The order, found by a search for its buyer, refunded through the confirmation page.
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/orders"]`)))
	b.submit(chromedp.SendKeys(chromedp.ID("buyer"), buyerID), chromedp.Click(chromedp.CSS(`main form.filters button[type=submit]`)))
	if rows := b.tableRows(); len(rows) != 1 || rows[0][0] != order.OrderNo {
		t.Fatalf("the search for %s's orders: %q, want the one order %s", buyerID, rows, order.OrderNo)
	}
	b.screen("orders")
	b.submit(chromedp.Click(chromedp.CSS(`main td a[href="/console/orders/` + order.OrderNo + `"]`)))
	b.wantPath("/console/orders/" + order.OrderNo)
	b.wantText("dl", "PAID")
	b.screen("order")
	b.submit(chromedp.Click(chromedp.CSS(`main a[href$="/refund"]`)))
	b.wantPath("/console/orders/" + order.OrderNo + "/refund")
	b.do(chromedp.SendKeys(chromedp.ID("reason"), "the buyer asked"))
	b.screen("refund-confirm")
	b.submit(chromedp.Click(chromedp.CSS(`button.danger`)))
	b.wantText(".notice", "Refunded: 0 code(s) voided, 2 recycled.")
	b.wantText("dl", "REFUNDED")

	// The blocklist: an operator blocks a disposable-mail domain; the list shows it.
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/blocklist"]`)))
	b.wantPath("/console/blocklist")
	b.do(chromedp.SetValue(chromedp.CSS(`select[name=kind]`), "email_domain"),
		chromedp.SendKeys(chromedp.CSS(`input[name=value]`), "mailinator.example"),
		chromedp.SendKeys(chromedp.CSS(`input[name=note]`), "disposable addresses"))
	b.submit(chromedp.Click(chromedp.CSS(`form.card button[type=submit]`)))
	b.wantText("main", "mailinator.example")
	b.screen("blocklist")

	// The alerts screen: nothing went wrong in this sale.
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/alerts"]`)))
	b.wantText("h1", "Alerts")
	b.screen("alerts")

	// Alice reads times in Shanghai's zone from now on (the link is the zone's name in the
	// header).
	b.submit(chromedp.Click(chromedp.CSS(`header a[href="/console/settings"]`)))
	b.do(chromedp.Clear(chromedp.ID("time_zone")), chromedp.SendKeys(chromedp.ID("time_zone"), "Asia/Shanghai"))
	b.screen("settings")
	b.submit(chromedp.Click(chromedp.CSS(`main form button[type=submit]:not([id])`)))
	b.wantText(".notice", "Saved: times are shown in Asia/Shanghai.")

	// The audit log lists what alice did, with the API's action names, at Shanghai's times.
	b.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/audit"]`)))
	rows := b.tableRows()
	if len(rows) == 0 || !strings.HasSuffix(rows[0][0], " CST") {
		t.Errorf("the audit log's times are not in the zone picked: %q", rows)
	}
	// (A create has no target, as in the API: its parameters name the product.)
	for _, want := range [][3]string{{"product.create", "", `"name":"Gift card 50"`}, {"product.import", "product " + pid, ""},
		{"order.refund", "order " + order.OrderNo, `"reason":"the buyer asked"`}} {
		found := false
		for _, r := range rows {
			if len(r) >= 6 && r[1] == "alice (admin)" && r[2] == want[0] && r[3] == want[1] && strings.Contains(r[4], want[2]) && r[5] == "200" {
				found = true
			}
		}
		if !found {
			t.Errorf("the audit log page has no entry of alice's %s on %q with %s and result 200: %q", want[0], want[1], want[2], rows)
		}
	}
	b.screen("audit")
	b.checkClean()
	return pid, order.OrderNo
}

// The browser's window: screenshots are this wide.
const browserWidth, browserHeight = 1280, 800

// needChromium returns the browser's path (chromiumPath). Without one the test fails under
// CI=true, as porttest.RequireService does (CI must not pass by skipping), and skips otherwise.
func needChromium(t *testing.T) string {
	t.Helper()
	chromium, err := chromiumPath()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no browser and CI=true, so this fails instead of skipping: %v", err)
		}
		t.Skipf("no browser (set CI=true to fail instead): %v", err)
	}
	return chromium
}

// browserService is needChromium and the service on the memory adapters, configured by env
// with the settings given (NAME=value), on a free address of its own, stopped with the test.
func browserService(t *testing.T, settings ...string) (string, client) {
	t.Helper()
	chromium := needChromium(t)
	cfg, err := bootstrap.LoadConfig(env(settings...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	return chromium, runService(t, cfg, io.Discard)
}

// chromiumPath finds the browser: $CHROMIUM if set, else Debian's chromium (or another
// Chromium or Chrome) on PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("CHROMIUM=%s: %w", p, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: `make services` installs Debian's chromium")
}

// screenshotDir is $CONSOLE_SCREENSHOTS (relative to the repository's root), created; empty
// when unset, so a normal run writes no file.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
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

// browser is one headless Chromium with one tab, and the problems its pages reported.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
	// width × height is the browser's own viewport, which screen returns to after its look
	// at a phone's width.
	width, height int64

	mu       sync.Mutex
	urls     map[network.RequestID]string // every request's URL, for the messages
	expected map[string]int               // "status path" the test provokes → how many left
	allowed  map[network.RequestID]bool   // the requests whose status was expected
	problems []string
}

// stepTimeout bounds one browser step.
const stepTimeout = 15 * time.Second

func newBrowser(t *testing.T, chromium, base, shots string) *browser {
	t.Helper()
	return newSizedBrowser(t, chromium, base, shots, browserWidth, browserHeight)
}

// newSizedBrowser is newBrowser with a window of width × height (a phone's, for the shop).
func newSizedBrowser(t *testing.T, chromium, base, shots string, width, height int64) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.DisableGPU,
		chromedp.WindowSize(int(width), int(height)))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, base: base, shots: shots, width: width, height: height, urls: map[network.RequestID]string{},
		expected: map[string]int{}, allowed: map[network.RequestID]bool{}}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.event))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b.ctx = ctx
	// The first run starts the browser; it must have no deadline (the browser lives as long
	// as the context of that run), so a watchdog stops a browser that does not start.
	started := make(chan struct{})
	go func() {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			cancel()
		}
	}()
	err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height))
	close(started)
	if err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return b
}

// event sees every event of the tab, in order, in the tab's loop: it only records.
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.urls[ev.RequestID] = ev.Request.URL
	case *network.EventResponseReceived:
		if ev.Response.Status < 400 {
			return
		}
		key := fmt.Sprintf("%d %s", ev.Response.Status, urlPath(ev.Response.URL))
		if b.expected[key] > 0 {
			b.expected[key]--
			b.allowed[ev.RequestID] = true
			return
		}
		b.problems = append(b.problems, fmt.Sprintf("HTTP %d %s", ev.Response.Status, ev.Response.URL))
	case *network.EventLoadingFailed:
		b.problems = append(b.problems, fmt.Sprintf("request failed: %s %s (%s%s)", ev.Type, b.urls[ev.RequestID], ev.ErrorText, ev.BlockedReason))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			if len(a.Value) > 0 {
				args = append(args, string(a.Value))
			} else {
				args = append(args, a.Description)
			}
		}
		b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
	case *cdplog.EventEntryAdded:
		e := ev.Entry
		if e.Level != cdplog.EntryLevelError || (e.NetworkRequestID != "" && b.allowed[e.NetworkRequestID]) {
			return
		}
		b.problems = append(b.problems, fmt.Sprintf("console error (%s): %s %s", e.Source, e.Text, e.URL))
	}
}

func urlPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Path
}

// expect lets the next answer of status to path pass: the test provokes it.
func (b *browser) expect(status int, path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected[fmt.Sprintf("%d %s", status, path)]++
}

// takeProblems returns the problems reported so far and forgets them.
func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// checkClean fails the test on any problem a page reported, and on a provoked answer that
// never came.
func (b *browser) checkClean() {
	b.t.Helper()
	for _, p := range b.takeProblems() {
		b.t.Errorf("the browser reported: %s", p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, n := range b.expected {
		if n > 0 {
			b.t.Errorf("the test expected %s, which never came", k)
		}
	}
}

// checkWatcherSeesCSP proves that the watch on the page works and that the page's
// Content-Security-Policy is in force: an inline script put in the page is refused, and the
// refusal reaches the watch as a console error. It also fails on any problem so far.
func (b *browser) checkWatcherSeesCSP() {
	b.t.Helper()
	b.checkClean()
	b.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.createElement("script");
		s.textContent = "window.cspBroken = true"; document.body.appendChild(s); })()`))
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		n := len(b.problems)
		b.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := b.takeProblems()
	broken, err := run(b, chromedp.Evaluate[bool](`window.cspBroken === true`))
	if err != nil {
		b.t.Fatal(err)
	}
	if broken || len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "Content Security Policy") {
		b.t.Fatalf("an inline script: ran %v, reported %q; want it refused by the CSP and reported", broken, got)
	}
}

// run runs one action in the tab, bounded by stepTimeout.
func run[T any](b *browser, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// do runs steps in the tab, each run bounded.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := run(b, chromedp.Steps(steps...)); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.path())
	}
}

// submit runs steps that end in a navigation (a click on a link or a form's button) and
// waits for the new page to load.
func (b *browser) submit(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.path())
	}
}

// path is the path of the page the tab shows.
func (b *browser) path() string {
	loc, err := run(b, chromedp.Location())
	if err != nil {
		return "?"
	}
	return urlPath(loc)
}

func (b *browser) wantPath(want string) {
	b.t.Helper()
	if got := b.path(); got != want {
		b.t.Fatalf("the browser is at %s, want %s", got, want)
	}
}

// wantText fails unless the first element of sel shows text.
func (b *browser) wantText(sel, text string) {
	b.t.Helper()
	got, err := run(b, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: %s: %v (at %s)", sel, err, b.path())
	}
	if !strings.Contains(got, text) {
		b.t.Fatalf("%s on %s shows %q, want %q in it", sel, b.path(), got, text)
	}
}

// tableRows is the text of each cell of each row of the page's table body.
func (b *browser) tableRows() [][]string {
	b.t.Helper()
	rows, err := run(b, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll("tbody tr"),
		r => Array.from(r.cells, c => c.textContent.trim()))`))
	if err != nil {
		b.t.Fatal(err)
	}
	return rows
}

// waitRow reloads the page until the product's row shows its stock left and sold (the gate
// may take a moment on the real adapters).
func (b *browser) waitRow(name, stock, sold string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := b.tableRows()
		for _, r := range rows {
			if len(r) >= 4 && strings.HasPrefix(r[0], name) && r[2] == stock && r[3] == sold {
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: no row of %q with %s left and %s sold: %q", b.path(), name, stock, sold, rows)
		}
		time.Sleep(200 * time.Millisecond)
		b.do(chromedp.Reload())
	}
}

// screen checks that the page fits the window's width (nothing to scroll sideways: the
// stylesheet promises a console readable on a phone and a laptop) and writes the whole page
// as <name>.png to the screenshot folder, if there is one.
func (b *browser) screen(name string) {
	b.t.Helper()
	b.fits(name)
	b.shot(name)
	if b.width <= phoneWidth {
		return
	}
	// The same page on a phone's width (the viewport changes, the page is not reloaded: some
	// screens are the answer to a form): it must fit without horizontal scrolling too.
	b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight))
	b.fits(name + " (phone)")
	if name == "overview" || name == "order" || name == "overview-zh" {
		b.shot(name + "-phone")
	}
	b.do(chromedp.EmulateViewport(b.width, b.height))
}

// phoneWidth × phoneHeight is the phone every console screen must fit (a common 390 px wide
// one).
const phoneWidth, phoneHeight = 390, 844

// fits fails the test when the page is wider than the window (horizontal scrolling).
func (b *browser) fits(name string) {
	b.t.Helper()
	w, err := run(b, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
	if err != nil {
		b.t.Fatal(err)
	}
	if w[0] > w[1] {
		b.t.Errorf("the %s page (%s) is %d px wide in a window of %d px", name, b.path(), w[0], w[1])
	}
}

// shot writes the page's screenshot as name.png when screenshots are asked for.
func (b *browser) shot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	png, err := run(b, fullPage())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// fullPage is a PNG of the whole page at the viewport's width, however long the page is.
func fullPage() chromedp.Action[[]byte] {
	return func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		w, h := m.CSSLayoutViewport.ClientWidth, m.CSSContentSize.Height
		r, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: ptr(true), FromSurface: ptr(true),
			Clip: &page.Viewport{X: 0, Y: 0, Width: float64(w), Height: h, Scale: 1},
		})
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}
}

func ptr[T any](v T) *T { return &v }
