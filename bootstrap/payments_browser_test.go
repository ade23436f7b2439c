package bootstrap_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/adapters/porttest"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestPaymentChannelsInABrowser: two instances of the service share one MariaDB database and
// Redis, with no payment provider in their environment. An admin on the first configures
// epay in the console against its simulator: a malformed key is refused at save (nothing
// stored), a well-formed wrong key saves but its test call is refused by the gateway, the
// right key's test call is authenticated. The second instance, never restarted, offers epay
// within seconds, and a buyer on it pays through the simulator: the order is PAID and shows
// its code. Every console page fits 390 px; the audit log holds every change and test and no
// secret. With CONSOLE_SCREENSHOTS=dir it writes payments.png and payments-edit.png there.
func TestPaymentChannelsInABrowser(t *testing.T) {
	chromium := needChromium(t)
	sim := epaysim.New(epaysim.Config{})
	t.Cleanup(sim.Close)

	dsn, db := cliDatabase(t)
	pid := porttest.NewProductID()
	cleanRedisOf(t, pid)
	var cfgA bootstrap.Config
	a, _, _ := realService(t, time.Minute, func(cfg *bootstrap.Config) {
		cfg.MySQLDSN, cfg.PublicURL = bootstrap.ConnString(dsn), "http://"+cfg.HTTPAddr
		cfgA = *cfg
	})
	cfgB := cfgA
	cfgB.HTTPAddr = freeAddr(t)
	cfgB.PublicURL, cfgB.Migrate = "http://"+cfgB.HTTPAddr, false
	logsB := &lockedBuffer{}
	b := runService(t, cfgB, logsB)

	a.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Channel card","price":1000,"max_per_order":2}`, pid), nil)
	a.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, fmt.Sprintf("CHAN-%d-1\nCHAN-%d-2", pid, pid), nil)
	// B has shown the product page (cached per catalogue snapshot) before epay exists.
	if _, page := b.do("GET", fmt.Sprintf("/p/%d", pid), "", ""); strings.Contains(string(page), `value="epay"`) {
		t.Fatal("instance B offers epay before it is configured")
	}
	var op struct {
		Token string `json:"token"`
	}
	a.want(201, "POST", "/admin/operators", adminToken, `{"name":"owner","role":"admin"}`, &op)

	// The admin, on instance A.
	br := newBrowser(t, chromium, a.base, screenshotDir(t))
	br.do(chromedp.Navigate(a.base + "/console/lang?to=en&back=%2Fconsole%2Flogin"))
	br.submit(chromedp.SendKeys(chromedp.ID("token"), op.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	br.wantPath("/console")
	br.submit(chromedp.Click(chromedp.CSS(`nav a[href="/console/payments"]`)))
	br.wantText("h1", "Payment channels")
	br.wantText("#channel-epay", "Not configured")
	br.submit(chromedp.Click(chromedp.CSS(`#channel-epay a`)))
	br.wantPath("/console/payments/epay")
	fill := func(key string) {
		br.do(chromedp.SetValue(chromedp.ID("fld-url"), sim.URL()), chromedp.SetValue(chromedp.ID("fld-pid"), sim.PID()),
			chromedp.SetValue(chromedp.ID("fld-key"), key))
	}
	// A malformed key: refused at save, with the adapter's own words; nothing stored.
	fill("too-short")
	br.expect(400, "/console/payments/epay")
	br.submit(chromedp.Click(chromedp.CSS(`main form.card button[type=submit]`)))
	br.wantText(".error", "Not saved, nothing changed")
	br.wantText(".error", "epay merchant key must be at least 16 characters")
	if n := rowCount(t, db, "SELECT COUNT(*) FROM payment_channels"); n != 0 {
		t.Fatalf("a refused save stored %d channels", n)
	}
	fitsPhone(br, "payments-refused")
	// A well-formed key the gateway does not know: saved; its test is refused by the gateway.
	wrong := strings.Repeat("w", 32)
	fill(wrong)
	br.submit(chromedp.Click(chromedp.CSS(`main form.card button[type=submit]`)))
	br.wantText(".notice", "Saved epay")
	// From this save (the first, which enables epay) instance B is watched for the channel.
	offered := applyDelay(b.base+fmt.Sprintf("/p/%d", pid), 15*time.Second)
	br.submit(chromedp.Click(chromedp.CSS(`#channel-epay a`)))
	br.submit(chromedp.Click(chromedp.ID("test-button")))
	br.wantText(".test-bad", "Refused")
	br.wantText(".test-bad", "KEY")
	// The right key: the test call is authenticated.
	fill(sim.Key())
	br.submit(chromedp.Click(chromedp.CSS(`main form.card button[type=submit]`)))
	br.wantText(".notice", "Saved epay")
	br.screen("payments")
	br.submit(chromedp.Click(chromedp.CSS(`#channel-epay a`)))
	br.submit(chromedp.Click(chromedp.ID("test-button")))
	br.wantText(".test-ok", "Authenticated")
	br.screen("payments-edit")
	// The same screens in Chinese, on a phone's width too.
	br.do(chromedp.Navigate(a.base + "/console/lang?to=zh-CN&back=%2Fconsole%2Fpayments"))
	br.wantText("h1", "支付渠道")
	br.wantText("#channel-epay", "已启用")
	br.wantText("#channel-epay", "控制台")
	br.screen("payments-zh")
	br.submit(chromedp.Click(chromedp.CSS(`#channel-epay a`)))
	br.wantText("main", "密钥加密保存")
	br.screen("payments-edit-zh")
	// The other providers' forms (PEM text areas) fit a phone too, in both languages.
	for _, lang := range []string{"zh-CN", "en"} {
		for _, p := range []string{"stripe", "alipay", "wechatpay"} {
			br.do(chromedp.Navigate(a.base + "/console/lang?to=" + lang + "&back=%2Fconsole%2Fpayments%2F" + p))
			br.wantText("main h2", p)
			fitsPhone(br, "payments-"+p+" in "+lang)
		}
	}
	br.checkClean()

	// At rest the row holds no key; the audit log holds every change and test, and no key.
	var sealed []byte
	if err := db.QueryRow("SELECT secrets FROM payment_channels WHERE provider = 'epay'").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), sim.Key()) || strings.Contains(string(sealed), wrong) {
		t.Fatal("the stored channel holds its key in the clear")
	}
	audit := auditDump(t, db)
	for _, want := range []string{"payment_channel.save", "payment_channel.test"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log has no %s: %s", want, audit)
		}
	}
	for _, secret := range []string{sim.Key(), wrong, "too-short"} {
		if strings.Contains(audit, secret) {
			t.Fatalf("the audit log holds a key: %s", audit)
		}
	}

	// Instance B, never restarted, offers epay within seconds (CARDSHOP_CHANNELS_EVERY).
	delay := <-offered
	if delay < 0 {
		t.Fatalf("instance B does not offer epay 15 s after it was configured on A; its log:\n%s", logsB.String())
	}
	t.Logf("instance B offered epay %v after the save on instance A (CARDSHOP_CHANNELS_EVERY=%v)", delay.Round(time.Millisecond), cfgB.ChannelsEvery)

	// A buyer on instance B pays through epay.
	buyer := newSizedBrowser(t, chromium, b.base, "", phoneWidth, phoneHeight)
	buyer.do(chromedp.Navigate(fmt.Sprintf("%s/p/%d", b.base, pid)))
	buyer.do(chromedp.SendKeys(chromedp.CSS(`input[name=email]`), fmt.Sprintf("buyer%d@example.com", pid)))
	buyer.submit(chromedp.Click(chromedp.CSS(`#checkout button[type=submit]`)))
	buyer.submit(chromedp.Click(chromedp.CSS(`#confirm button[type=submit]`)))
	no := buyer.text(".summary code")
	buyer.do(chromedp.Click(chromedp.CSS(`form.pay input[value=epay]`)))
	buyer.submit(chromedp.Click(chromedp.CSS(`form.pay button[type=submit]`)))
	buyer.wantPath("/submit.php")
	buyer.wantText(".money", "10.00")
	if err := sim.Pay(context.Background(), no); err != nil {
		t.Fatalf("the gateway's notification to instance B: %v", err)
	}
	buyer.do(chromedp.Navigate(b.base + "/orders/" + no))
	buyer.do(chromedp.WaitVisible(chromedp.CSS(".codes")))
	if shown := buyer.text(".codes ol"); !strings.Contains(shown, fmt.Sprintf("CHAN-%d-", pid)) {
		t.Fatalf("the paid order shows %q, want its code", shown)
	}
	buyer.fits("order-paid")
	for _, p := range buyer.takeProblems() {
		if !strings.Contains(p, "favicon.ico") { // the simulator's page has no icon
			t.Errorf("the buyer's browser reported: %s", p)
		}
	}
	var status string
	if err := db.QueryRow("SELECT status FROM orders WHERE order_no = ?", no).Scan(&status); err != nil || status != "PAID" {
		t.Fatalf("order %s is %q (%v), want PAID", no, status, err)
	}
}

// applyDelay polls the product page at url every 50 ms from now until it offers epay, and sends
// how long that took, or -1 after limit.
func applyDelay(url string, limit time.Duration) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		client := &http.Client{Timeout: 5 * time.Second}
		for time.Since(start) < limit {
			if resp, err := client.Get(url); err == nil {
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if strings.Contains(string(body), `value="epay"`) {
					out <- time.Since(start)
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		out <- -1
	}()
	return out
}

// fitsPhone checks that the page fits the browser's window and a phone's, writing no
// screenshot.
func fitsPhone(b *browser, name string) {
	b.t.Helper()
	b.fits(name)
	b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight))
	b.fits(name + " (phone)")
	b.do(chromedp.EmulateViewport(b.width, b.height))
}

// cleanRedisOf deletes the product's gate keys from the shared Redis when the test ends.
func cleanRedisOf(t *testing.T, p domain.ProductID) {
	cleaner := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr})
	t.Cleanup(func() {
		defer cleaner.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		keys, err := cleaner.Keys(ctx, fmt.Sprintf("*%d*", p)).Result()
		if err == nil && len(keys) > 0 {
			err = cleaner.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("delete the keys of product %d: %v", p, err)
		}
	})
}

// rowCount is the single number query q answers.
func rowCount(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// auditDump is every audit entry's action, parameters and result, one a line.
func auditDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SELECT action, params, result FROM audit_log ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var action, params, result string
		if err := rows.Scan(&action, &params, &result); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", action, params, result)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
