package bootstrap_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"cardshop/adapters/lab/alertsim"
	"cardshop/bootstrap"
)

// TestAlertChannelsInABrowser drives the alert channels page in headless Chromium, in English
// and in Chinese, against the Telegram and WeCom simulators (CARDSHOP_ALERT_TELEGRAM_URL,
// CARDSHOP_ALERT_WECOM_URL): an admin adds a channel with a key the service does not know, and
// "Send a test" shows the simulator's refusal; the admin puts the right key in its edit form
// (the stored one is never shown, only its fingerprint) and the test is delivered, once. Every
// screen fits a 390 px wide phone. With CONSOLE_SCREENSHOTS=dir the page is written as
// alert-channels.png (English) and alert-channels-zh.png.
func TestAlertChannelsInABrowser(t *testing.T) {
	chromium := needChromium(t)
	const (
		token    = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
		badToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDbad"
		chat     = -1001234567890
		key      = "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"
		badKey   = "00000000-0000-0000-0000-000000000000"
	)
	tg := alertsim.NewTelegram(alertsim.TelegramConfig{Token: token, Chats: []int64{chat}})
	defer tg.Close()
	wc := alertsim.NewWeCom(alertsim.WeComConfig{Key: key})
	defer wc.Close()
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_ALERT_TELEGRAM_URL="+tg.URL(), "CARDSHOP_ALERT_WECOM_URL="+wc.URL()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	c := runService(t, cfg, io.Discard)
	var op struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/operators", adminToken, `{"name":"alertadmin","role":"admin"}`, &op)

	b := newBrowser(t, chromium, c.base, screenshotDir(t))
	b.do(chromedp.Navigate(c.base + "/console/login"))
	b.submit(chromedp.SendKeys(chromedp.ID("token"), op.Token), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	b.wantPath("/console")

	for _, lang := range []struct {
		tag, shot, title, refused, delivered, fingerprint string
		typ, target, good, bad                            string
		messages                                          func() int
	}{
		{"en", "alert-channels", "Alert channels", "refused the test", "Test delivered", "keep the stored secret",
			"wecom", "", key, badKey, func() int { return len(wc.Messages()) }},
		{"zh-CN", "alert-channels-zh", "告警渠道", "拒绝了测试消息", "测试消息已送达", "保留已保存的密钥",
			"telegram", fmt.Sprint(chat), token, badToken, func() int { return len(tg.Messages()) }},
	} {
		t.Run(lang.tag, func(t *testing.T) {
			b.t = t
			// The switch's link, as a click on it would follow it.
			b.submit(chromedp.Navigate(c.base + "/console/lang?to=" + lang.tag + "&back=/console/alerts/channels"))
			b.wantPath("/console/alerts/channels")
			b.wantText("h1", lang.title)

			name := "phone-" + lang.tag
			b.do(chromedp.SendKeys(chromedp.ID("ch-name"), name), chromedp.SetValue(chromedp.ID("ch-type"), lang.typ),
				chromedp.SendKeys(chromedp.ID("ch-secret"), lang.bad))
			if lang.target != "" {
				b.do(chromedp.SendKeys(chromedp.ID("ch-target"), lang.target))
			}
			b.submit(chromedp.Click(chromedp.CSS(`form.card button[type=submit]`)))
			b.wantText(".notice", name)
			page := b.text("main")
			if strings.Contains(page, lang.bad) {
				t.Fatal("the page shows the secret back")
			}

			// The wrong key: the simulator refuses the test, and the page says what it answered.
			b.submit(chromedp.Click(chromedp.CSS(`section.card form[action$="/test"] button`)))
			b.wantText(".error", lang.refused)
			if lang.typ == "wecom" {
				b.wantText(".error", "93000")
			} else {
				b.wantText(".error", "401")
			}
			if strings.Contains(b.text(".error"), lang.bad) {
				t.Fatal("the refusal shows the secret")
			}
			b.screen(lang.shot)

			// The right key, through the edit form: the stored secret is never shown back.
			b.submit(chromedp.Click(chromedp.CSS(`section.card a[href^="/console/alerts/channels/"]`)))
			b.wantText("#ch-secret-hint", lang.fingerprint)
			if v := b.text("main"); strings.Contains(v, lang.bad) {
				t.Fatal("the edit form shows the secret back")
			}
			b.screen(lang.shot + "-edit")
			b.do(chromedp.SendKeys(chromedp.ID("ch-secret"), lang.good))
			b.submit(chromedp.Click(chromedp.CSS(`form.card button[type=submit]`)))
			b.wantText(".notice", name)
			before := lang.messages()
			b.submit(chromedp.Click(chromedp.CSS(`section.card form[action$="/test"] button`)))
			b.wantText(".notice", lang.delivered)
			if got := lang.messages() - before; got != 1 {
				t.Fatalf("the simulator got %d messages from the test, want 1", got)
			}
			b.fits(lang.shot + " (delivered)")

			// Removed, so that the next language starts with an empty list.
			b.submit(chromedp.Click(chromedp.CSS(`section.card button.danger`)))
			b.wantText(".notice", name)
			b.checkClean()
		})
	}
}
