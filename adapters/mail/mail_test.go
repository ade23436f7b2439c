package mail_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/i18n"
	"cardshop/adapters/lab/mailpit"
	"cardshop/adapters/mail"
	"cardshop/domain"
)

const from = "shop@cards.example"

// newMailer is a Mailer that sends to mp in clear text.
func newMailer(t *testing.T, mp *mailpit.Server, mut ...func(*mail.Config)) *mail.Mailer {
	t.Helper()
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := mail.Config{Addr: mp.SMTPAddr, From: from, FromName: "卡密商店", TLS: mail.TLSNone,
		Timeout: 5 * time.Second, HELO: "shop.test", MessageIDDomain: "mail.cards.example"}
	for _, f := range mut {
		f(&cfg)
	}
	m, err := mail.New(cfg, cat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// orderMail is a paid order's mail with three codes.
func orderMail(id, lang string) domain.OrderMail {
	return domain.OrderMail{
		ID: id, OrderNo: domain.OrderNo("O" + id), To: "buyer-" + id + "@example.com", Lang: lang,
		Product: "Steam 礼品卡 100", Qty: 3, Amount: "300.00 CNY",
		PaidAt:   time.Date(2026, 12, 4, 10, 30, 0, 0, time.UTC),
		Codes:    []string{"CODE-" + id + "-AAAA", "CODE-" + id + "-BBBB", "CODE-" + id + "-CCCC"},
		OrderURL: "https://cards.example/order/O" + id + "?key=SECRETKEY" + id,
	}
}

// received reads every message in mp's inbox in full, after waiting for n of them.
func received(t *testing.T, mp *mailpit.Server, n int) []mailpit.Message {
	t.Helper()
	ctx := context.Background()
	list, err := mp.WaitFor(ctx, n, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]mailpit.Message, 0, len(list))
	for _, s := range list {
		m, err := mp.Message(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// checkCodesOnce fails unless each code occurs exactly once in both bodies of got.
func checkCodesOnce(t *testing.T, got mailpit.Message, codes []string) {
	t.Helper()
	for _, c := range codes {
		if n := strings.Count(got.Text, c); n != 1 {
			t.Errorf("code %s is %d times in the text part, want once:\n%s", c, n, got.Text)
		}
		if n := strings.Count(got.HTML, c); n != 1 {
			t.Errorf("code %s is %d times in the HTML part, want once", c, n)
		}
		if n := strings.Count(got.HTML, "<code"); n != len(codes) {
			t.Errorf("%d <code> blocks in the HTML part, want %d", n, len(codes))
		}
	}
	text := "\n" + strings.ReplaceAll(got.Text, "\r\n", "\n") + "\n"
	for _, line := range codes {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("code %s is not on a line of its own in the text part", line)
		}
	}
}

// TestOrderMailInChineseAndEnglish: each language's mail arrives with its subject, sender,
// recipient, stable Message-ID, the headers of an automatic mail, both parts, every code once,
// the order's details and its link.
func TestOrderMailInChineseAndEnglish(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	m := newMailer(t, mp)
	cases := []struct {
		lang, subject, intro, qty string
	}{
		{"zh-CN", "您的订单 Ozh1 已支付成功", "您购买的卡密如下", "\n数量：3\n"},
		{"en", "Your order Oen1 is paid", "your codes are below", "\nQuantity: 3\n"},
	}
	for _, c := range cases {
		om := orderMail(strings.ReplaceAll(c.lang, "-CN", "")+"1", c.lang)
		if err := m.SendOrderMail(context.Background(), om); err != nil {
			t.Fatal(err)
		}
		ms, err := mp.WaitFor(context.Background(), 1, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mp.Message(context.Background(), ms[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Subject != c.subject {
			t.Errorf("%s: subject %q, want %q", c.lang, got.Subject, c.subject)
		}
		if got.From.Address != from || got.From.Name != "卡密商店" {
			t.Errorf("%s: from %+v", c.lang, got.From)
		}
		if len(got.To) != 1 || got.To[0].Address != om.To {
			t.Errorf("%s: to %+v, want %s", c.lang, got.To, om.To)
		}
		if want := om.ID + "@mail.cards.example"; got.MessageID != want || m.MessageID(om) != want {
			t.Errorf("%s: Message-ID %q (mailer says %q), want %q", c.lang, got.MessageID, m.MessageID(om), want)
		}
		if h := got.Headers["Auto-Submitted"]; len(h) != 1 || h[0] != "auto-generated" {
			t.Errorf("%s: Auto-Submitted %v", c.lang, h)
		}
		if len(got.Headers["Date"]) != 1 || got.Date.IsZero() {
			t.Errorf("%s: no Date header: %v", c.lang, got.Headers["Date"])
		}
		if got.Text == "" || got.HTML == "" {
			t.Fatalf("%s: text %d bytes, HTML %d bytes: want both parts", c.lang, len(got.Text), len(got.HTML))
		}
		if !strings.Contains(got.Text, c.intro) || !strings.Contains(got.HTML, c.intro) {
			t.Errorf("%s: the intro %q is missing", c.lang, c.intro)
		}
		if !strings.Contains(got.HTML, `lang="`+c.lang+`"`) {
			t.Errorf("%s: the HTML part does not declare its language", c.lang)
		}
		checkCodesOnce(t, got, om.Codes)
		for _, want := range []string{string(om.OrderNo), om.Product, "300.00 CNY", "2026-12-04 10:30:00 UTC", om.OrderURL} {
			if !strings.Contains(got.Text, want) || !strings.Contains(got.HTML, want) {
				t.Errorf("%s: %q missing from a part", c.lang, want)
			}
		}
		if !strings.Contains(strings.ReplaceAll(got.Text, "\r\n", "\n"), c.qty) {
			t.Errorf("%s: the quantity is missing from the text part:\n%s", c.lang, got.Text)
		}
		raw, err := mp.Raw(context.Background(), ms[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(raw, "multipart/alternative") {
			t.Errorf("%s: not multipart/alternative:\n%s", c.lang, raw)
		}
		if c.lang == "zh-CN" && !strings.Contains(raw, "=?UTF-8?q?=E6=82=A8") {
			t.Errorf("the Chinese subject is not encoded as UTF-8:\n%s", raw)
		}
		if err := mp.DeleteAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOrderMailUnknownLanguageFallsBackToChinese: a language the catalogues lack gets the
// Chinese mail.
func TestOrderMailUnknownLanguageFallsBackToChinese(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	om := orderMail("fr1", "fr-FR")
	if err := newMailer(t, mp).SendOrderMail(context.Background(), om); err != nil {
		t.Fatal(err)
	}
	got := received(t, mp, 1)
	if got[0].Subject != "您的订单 Ofr1 已支付成功" {
		t.Fatalf("subject %q, want the Chinese one", got[0].Subject)
	}
}

// TestOrderMailLinkOnly: without codes, or with Config.LinkOnly whatever the mail carries, the
// mail has the link and no code.
func TestOrderMailLinkOnly(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	empty := orderMail("link1", "en")
	codes := empty.Codes
	empty.Codes = nil
	if err := newMailer(t, mp).SendOrderMail(context.Background(), empty); err != nil {
		t.Fatal(err)
	}
	forced := orderMail("link2", "zh-CN")
	linkOnly := newMailer(t, mp, func(c *mail.Config) { c.LinkOnly = true })
	if err := linkOnly.SendOrderMail(context.Background(), forced); err != nil {
		t.Fatal(err)
	}
	for _, got := range received(t, mp, 2) {
		om, all := empty, codes
		if got.MessageID == forced.ID+"@mail.cards.example" {
			om, all = forced, forced.Codes
		}
		for _, c := range all {
			if strings.Contains(got.Text, c) || strings.Contains(got.HTML, c) {
				t.Errorf("%s: code %s is in a link-only mail", om.ID, c)
			}
		}
		if strings.Contains(got.HTML, "<code") {
			t.Errorf("%s: a <code> block in a link-only mail", om.ID)
		}
		if !strings.Contains(got.Text, om.OrderURL) || !strings.Contains(got.HTML, om.OrderURL) {
			t.Errorf("%s: the order link is missing", om.ID)
		}
	}
}

// TestOrderMailEscapesHTML: a product name with markup is text in the HTML part, and a link
// that is no web address cannot become a script.
func TestOrderMailEscapesHTML(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	om := orderMail("esc1", "en")
	om.Product = `<script>alert("x")</script> Tom & Jerry`
	if err := newMailer(t, mp).SendOrderMail(context.Background(), om); err != nil {
		t.Fatal(err)
	}
	got := received(t, mp, 1)[0]
	if strings.Contains(got.HTML, "<script>") || strings.Contains(got.HTML, "Tom & Jerry") {
		t.Fatalf("the product is not escaped in the HTML part:\n%s", got.HTML)
	}
	if !strings.Contains(got.HTML, "&lt;script&gt;") || !strings.Contains(got.HTML, "Tom &amp; Jerry") {
		t.Fatalf("the escaped product is missing from the HTML part:\n%s", got.HTML)
	}
	if !strings.Contains(got.Text, om.Product) {
		t.Fatalf("the text part does not show the product as it is:\n%s", got.Text)
	}

	om = orderMail("esc2", "en")
	om.OrderURL = "javascript:alert(1)"
	if err := newMailer(t, mp).SendOrderMail(context.Background(), om); err != nil {
		t.Fatal(err)
	}
	for _, g := range received(t, mp, 2) {
		if strings.Contains(g.HTML, `href="javascript:`) {
			t.Fatalf("a javascript: link in the HTML part:\n%s", g.HTML)
		}
	}
}

// TestOrderMailResentKeepsItsMessageID: sending the same mail twice (the relay's retry after an
// unknown outcome) delivers two copies with one Message-ID and the same codes: at least once,
// recognisably one mail.
func TestOrderMailResentKeepsItsMessageID(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	m := newMailer(t, mp)
	om := orderMail("twice1", "zh-CN")
	for range 2 {
		if err := m.SendOrderMail(context.Background(), om); err != nil {
			t.Fatal(err)
		}
	}
	got := received(t, mp, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2", len(got))
	}
	for _, g := range got {
		if g.MessageID != "twice1@mail.cards.example" {
			t.Errorf("Message-ID %q", g.MessageID)
		}
		checkCodesOnce(t, g, om.Codes)
	}
	if got[0].Text != got[1].Text || got[0].HTML != got[1].HTML {
		t.Error("the two copies differ")
	}
}

// TestOrderMailServerDown: no server, or one that refuses the recipient, is an error (no
// panic); the mail sent again once the server takes it arrives with its id.
func TestOrderMailServerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	down, err := mail.New(mail.Config{Addr: addr, From: from, TLS: mail.TLSNone, Timeout: 2 * time.Second}, cat)
	if err != nil {
		t.Fatal(err)
	}
	om := orderMail("down1", "en")
	err = down.SendOrderMail(context.Background(), om)
	if err == nil {
		t.Fatal("sent to a closed port")
	}
	for _, secret := range append([]string{om.OrderURL, "SECRETKEY"}, om.Codes...) {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows %q: %v", secret, err)
		}
	}

	mp := mailpit.Start(t, mailpit.Options{Chaos: true})
	ctx := context.Background()
	if err := mp.SetChaos(ctx, mailpit.Chaos{Recipient: mailpit.Trigger{ErrorCode: 451, Probability: 100}}); err != nil {
		t.Fatal(err)
	}
	m := newMailer(t, mp)
	if err := m.SendOrderMail(ctx, om); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("a refused recipient: %v, want the server's 451", err)
	}
	if err := mp.SetChaos(ctx, mailpit.Chaos{}); err != nil {
		t.Fatal(err)
	}
	if err := m.SendOrderMail(ctx, om); err != nil {
		t.Fatal(err)
	}
	got := received(t, mp, 1)
	if len(got) != 1 || got[0].MessageID != "down1@mail.cards.example" {
		t.Fatalf("after the refusal: %+v", got)
	}
}

// TestOrderMailCancelled: a cancelled context ends the attempt with an error.
func TestOrderMailCancelled(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newMailer(t, mp).SendOrderMail(ctx, orderMail("cancel1", "en")); err == nil {
		t.Fatal("sent with a cancelled context")
	}
}

// TestOrderMailConcurrent: 20 mails sent at once from 20 goroutines through one Mailer each
// arrive exactly once, with their own codes.
func TestOrderMailConcurrent(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	m := newMailer(t, mp)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	want := map[string]domain.OrderMail{}
	for i := range n {
		om := orderMail(fmt.Sprintf("conc%02d", i), []string{"zh-CN", "en"}[i%2])
		want[om.ID+"@mail.cards.example"] = om
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.SendOrderMail(context.Background(), om)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := received(t, mp, n)
	seen := map[string]int{}
	for _, g := range got {
		seen[g.MessageID]++
		om, ok := want[g.MessageID]
		if !ok {
			t.Fatalf("an unexpected mail %q", g.MessageID)
		}
		if len(g.To) != 1 || g.To[0].Address != om.To {
			t.Errorf("%s went to %+v, want %s", g.MessageID, g.To, om.To)
		}
		checkCodesOnce(t, g, om.Codes)
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s arrived %d times, want once", id, seen[id])
		}
	}
}

// TestOrderMailWithSMTPAuthRefusesClearText: over a clear-text link the mailer does not send
// the password with PLAIN or LOGIN (the only mechanisms this server offers): an error, and
// nothing arrives. (The login over TLS is TestOrderMailOverTLS.)
func TestOrderMailWithSMTPAuthRefusesClearText(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{AcceptAnyAuth: true})
	m := newMailer(t, mp, func(c *mail.Config) { c.Username, c.Password = "shop", domain.Secret("pw-123") })
	err := m.SendOrderMail(context.Background(), orderMail("auth1", "en"))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Fatalf("login over clear text: %v, want an authentication error", err)
	}
	if strings.Contains(err.Error(), "pw-123") {
		t.Fatalf("the error shows the password: %v", err)
	}
	if ms, err := mp.Messages(context.Background()); err != nil || len(ms) != 0 {
		t.Fatalf("inbox %+v, %v; want nothing", ms, err)
	}
}

// TestOrderMailOverTLS: over STARTTLS and over TLS from the first byte, with a certificate the
// mailer trusts, the mail arrives and the login is sent (Mailpit records the user); a
// certificate it does not trust, or a server without STARTTLS in starttls mode, is an error
// and nothing arrives.
func TestOrderMailOverTLS(t *testing.T) {
	for _, mode := range []mail.TLSMode{mail.TLSStartTLS, mail.TLSImplicit} {
		t.Run(string(mode), func(t *testing.T) {
			mp := mailpit.Start(t, mailpit.Options{TLS: string(mode), AcceptAnyAuth: true})
			untrusted := newMailer(t, mp, func(c *mail.Config) { c.TLS = mode })
			err := untrusted.SendOrderMail(context.Background(), orderMail("tls0", "en"))
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("a server whose certificate is not trusted: %v, want a certificate error", err)
			}
			m := newMailer(t, mp, func(c *mail.Config) {
				c.TLS, c.RootCAs = mode, mp.RootCAs
				c.Username, c.Password = "shop", domain.Secret("pw-123")
			})
			om := orderMail("tls1", "zh-CN")
			if err := m.SendOrderMail(context.Background(), om); err != nil {
				t.Fatal(err)
			}
			got := received(t, mp, 1)
			if len(got) != 1 || got[0].MessageID != "tls1@mail.cards.example" || got[0].Username != "shop" {
				t.Fatalf("received %d: %+v", len(got), got)
			}
			checkCodesOnce(t, got[0], om.Codes)
		})
	}
	t.Run("starttls required, not offered", func(t *testing.T) {
		mp := mailpit.Start(t, mailpit.Options{})
		m := newMailer(t, mp, func(c *mail.Config) { c.TLS = mail.TLSStartTLS })
		if err := m.SendOrderMail(context.Background(), orderMail("plain1", "en")); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
			t.Fatalf("starttls mode, a server without it: %v, want an error about STARTTLS", err)
		}
		if ms, err := mp.Messages(context.Background()); err != nil || len(ms) != 0 {
			t.Fatalf("inbox %+v, %v; want nothing", ms, err)
		}
	})
}

// TestNewRefusesBadConfig: an address, a sender, a TLS mode or a Message-ID domain that cannot
// work is refused at start, not at the first mail.
func TestNewRefusesBadConfig(t *testing.T) {
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	good := mail.Config{Addr: "127.0.0.1:1025", From: from}
	if _, err := mail.New(good, cat); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	if _, err := mail.New(good, nil); err == nil {
		t.Error("no catalogue accepted")
	}
	for name, f := range map[string]func(*mail.Config){
		"no port":        func(c *mail.Config) { c.Addr = "127.0.0.1" },
		"bad port":       func(c *mail.Config) { c.Addr = "127.0.0.1:70000" },
		"no host":        func(c *mail.Config) { c.Addr = ":25" },
		"bad from":       func(c *mail.Config) { c.From = "not an address" },
		"from with name": func(c *mail.Config) { c.From = "Shop <shop@example.com>" },
		"bad tls":        func(c *mail.Config) { c.TLS = "ssl3" },
		"bad id domain":  func(c *mail.Config) { c.MessageIDDomain = "a b" },
		"negative time":  func(c *mail.Config) { c.Timeout = -time.Second },
	} {
		c := good
		f(&c)
		if _, err := mail.New(c, cat); err == nil {
			t.Errorf("%s: accepted %+v", name, c)
		}
	}
	for _, s := range []string{"none", "STARTTLS", " tls "} {
		if _, err := mail.ParseTLSMode(s); err != nil {
			t.Errorf("ParseTLSMode(%q): %v", s, err)
		}
	}
}

// TestOrderMailRefusesBadMail: a mail whose id cannot be a Message-ID, or whose address is no
// address, is an error before any connection.
func TestOrderMailRefusesBadMail(t *testing.T) {
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Port 1 has no server: reaching it would be a different error.
	m, err := mail.New(mail.Config{Addr: "127.0.0.1:1", From: from, TLS: mail.TLSNone}, cat)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*domain.OrderMail){
		"empty id":     func(o *domain.OrderMail) { o.ID = "" },
		"id with @":    func(o *domain.OrderMail) { o.ID = "a@b" },
		"id with >":    func(o *domain.OrderMail) { o.ID = "a>b" },
		"bad address":  func(o *domain.OrderMail) { o.To = "nobody" },
		"header break": func(o *domain.OrderMail) { o.To = "a@example.com\r\nBcc: x@example.com" },
	} {
		om := orderMail("bad1", "en")
		f(&om)
		err := m.SendOrderMail(context.Background(), om)
		if err == nil || strings.Contains(err.Error(), "dial") {
			t.Errorf("%s: %v, want a refusal before dialling", name, err)
		}
	}
}

// TestCatalogueHasEveryMailMessage: every message the mail uses exists in both languages.
func TestCatalogueHasEveryMailMessage(t *testing.T) {
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range mail.MessageIDs() {
		for _, l := range i18n.Langs {
			if !cat.Has(l, id) {
				t.Errorf("%s has no message %q", l, id)
			}
		}
	}
	if len(mail.MessageIDs()) < 10 {
		t.Fatalf("only %d message ids", len(mail.MessageIDs()))
	}
}
