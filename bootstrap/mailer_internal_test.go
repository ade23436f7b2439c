package bootstrap

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"cardshop/adapters/lab/mailpit"
	"cardshop/domain"
)

// mailerIn takes the mailer as its users do: optional.
type mailerIn struct {
	fx.In
	Mailer domain.Mailer `optional:"true"`
}

// provided is the domain.Mailer that mailer(cfg) gives fx, or nil.
func provided(t *testing.T, cfg Config) domain.Mailer {
	t.Helper()
	var got domain.Mailer
	app := fxtest.New(t, fx.Supply(cfg), mailer(cfg), fx.Invoke(func(in mailerIn) { got = in.Mailer }))
	app.RequireStart().RequireStop()
	return got
}

// Without CARDSHOP_SMTP_ADDR there is no mailer; with it, the mailer sends through the server
// with the sender's display name from CARDSHOP_SMTP_FROM, the Message-ID in the sender's
// domain, and (CARDSHOP_MAIL_CODES=false) the link only.
func TestMailerFollowsTheSMTPSettings(t *testing.T) {
	if m := provided(t, Config{}); m != nil {
		t.Fatalf("a mailer (%T) without CARDSHOP_SMTP_ADDR", m)
	}
	mp := mailpit.Start(t, mailpit.Options{})
	for _, codes := range []bool{true, false} {
		cfg := Config{SMTPAddr: mp.SMTPAddr, SMTPFrom: "Card shop <shop@cards.example>", SMTPTLS: "none"}
		cfg.MailCodes = codes
		if err := checkMail(cfg); err != nil {
			t.Fatal(err)
		}
		m := provided(t, cfg)
		if m == nil {
			t.Fatal("no mailer with CARDSHOP_SMTP_ADDR set")
		}
		om := domain.OrderMail{ID: "boot1", OrderNo: "B1", To: "buyer@example.com", Lang: "en", Product: "P",
			Qty: 1, Amount: "1.00 CNY", PaidAt: time.Now(), Codes: []string{"BOOT-CODE-1"}, OrderURL: "http://127.0.0.1:8080/o"}
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
		if got.From.Name != "Card shop" || got.From.Address != "shop@cards.example" || got.MessageID != "boot1@cards.example" {
			t.Errorf("codes=%v: from %+v, Message-ID %q", codes, got.From, got.MessageID)
		}
		if strings.Contains(got.Text, "BOOT-CODE-1") != codes {
			t.Errorf("CARDSHOP_MAIL_CODES=%v, but the code in the mail is %v", codes, !codes)
		}
		if err := mp.DeleteAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Mail settings that cannot send are refused at start.
func TestLoadConfigRefusesBadMailSettings(t *testing.T) {
	base := []string{"CARDSHOP_ADMIN_TOKEN=admin-token-0123456789", "CARDSHOP_PAYMENT_SECRET=payment-secret-0123456789",
		"CARDSHOP_TOKEN_SECRET=token-secret-0123456789"}
	c, err := LoadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if c.SMTPAddr != "" || c.SMTPTLS != "starttls" || !c.MailCodes {
		t.Fatalf("defaults: addr %q, tls %q, codes %v", c.SMTPAddr, c.SMTPTLS, c.MailCodes)
	}
	good := append(append([]string{}, base...), "CARDSHOP_SMTP_ADDR=smtp.example.com:587", "CARDSHOP_SMTP_FROM=Shop <shop@example.com>",
		"CARDSHOP_SMTP_USER=shop", "CARDSHOP_SMTP_PASSWORD=pw", "CARDSHOP_SMTP_TLS=tls", "CARDSHOP_MAIL_CODES=false")
	c, err = LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.SMTPTLS != "tls" || c.MailCodes || c.SMTPPassword.Reveal() != "pw" {
		t.Fatalf("read %+v", c)
	}
	for name, extra := range map[string][]string{
		"no from":           {"CARDSHOP_SMTP_ADDR=smtp.example.com:587"},
		"bad from":          {"CARDSHOP_SMTP_ADDR=smtp.example.com:587", "CARDSHOP_SMTP_FROM=nobody"},
		"no port":           {"CARDSHOP_SMTP_ADDR=smtp.example.com", "CARDSHOP_SMTP_FROM=shop@example.com"},
		"bad tls":           {"CARDSHOP_SMTP_ADDR=smtp.example.com:587", "CARDSHOP_SMTP_FROM=shop@example.com", "CARDSHOP_SMTP_TLS=ssl"},
		"password, no user": {"CARDSHOP_SMTP_ADDR=smtp.example.com:587", "CARDSHOP_SMTP_FROM=shop@example.com", "CARDSHOP_SMTP_PASSWORD=pw"},
		"codes not a bool":  {"CARDSHOP_MAIL_CODES=yes please"},
	} {
		if _, err := LoadConfig(append(append([]string{}, base...), extra...)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
