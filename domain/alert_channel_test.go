package domain_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"cardshop/domain"
)

func TestValidateAlertChannel(t *testing.T) {
	const tok = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	ok := []domain.AlertChannel{
		{Name: "ops", Type: domain.ChannelTelegram, Target: "-1001234567890", Secret: tok},
		{Name: "ops", Type: domain.ChannelTelegram, Target: "@shop_alerts", Secret: tok},
		{Name: "群", Type: domain.ChannelWeCom, Secret: "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"},
		{Name: "mail", Type: domain.ChannelEmail, Target: "ops@shop.example"},
		{Name: "hook", Type: domain.ChannelWebhook, Target: "https://hooks.example/alerts", Secret: "0123456789abcdef"},
		{Name: "hook", Type: domain.ChannelWebhook, Target: "http://127.0.0.1:9000/a", Secret: "0123456789abcdef"},
	}
	for _, c := range ok {
		if _, err := domain.ValidateAlertChannel(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := []struct {
		c     domain.AlertChannel
		field string
	}{
		{domain.AlertChannel{Type: domain.ChannelEmail, Target: "a@b.example"}, "name"},
		{domain.AlertChannel{Name: strings.Repeat("n", 65), Type: domain.ChannelEmail, Target: "a@b.example"}, "name"},
		{domain.AlertChannel{Name: "x", Type: "sms"}, "type"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelTelegram, Target: "-100", Secret: "not-a-token"}, "secret"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelTelegram, Target: "chat", Secret: tok}, "target"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelWeCom, Secret: "k y"}, "secret"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelWeCom, Secret: "693a91f6-7b1c", Target: "x"}, "target"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelEmail, Target: "Ops <a@b.example>"}, "target"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelEmail, Target: "a@b.example", Secret: "s"}, "secret"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelWebhook, Target: "http://hooks.example/a", Secret: "0123456789abcdef"}, "target"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelWebhook, Target: "https://hooks.example/a", Secret: "short"}, "secret"},
		{domain.AlertChannel{Name: "x", Type: domain.ChannelEmail, Target: "a@b.example", Kinds: []string{"Bad Kind"}}, "kinds"},
	}
	for _, b := range bad {
		_, err := domain.ValidateAlertChannel(b.c)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != b.field || !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%+v: %v, want a refusal of %s", b.c, err, b.field)
		}
	}
	c, _ := domain.ValidateAlertChannel(domain.AlertChannel{Name: "m", Type: domain.ChannelEmail, Target: "a@b.example",
		Kinds: []string{"refund_failed", "mail_failed", "refund_failed"}})
	if !slices.Equal(c.Kinds, []string{"mail_failed", "refund_failed"}) {
		t.Fatalf("kinds %v, want sorted and unique", c.Kinds)
	}
}

func TestAlertChannelWantsAndFingerprint(t *testing.T) {
	c := domain.AlertChannel{Enabled: true, Kinds: []string{"mail_failed"}, Secret: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"}
	for _, w := range []struct {
		kind  string
		stock bool
		want  bool
	}{{"mail_failed", false, true}, {"refund_failed", false, false}, {"product.sold_out", true, false}} {
		if got := c.Wants(w.kind, w.stock); got != w.want {
			t.Errorf("Wants(%q, %v) = %v", w.kind, w.stock, got)
		}
	}
	all := domain.AlertChannel{Enabled: true, Stock: true}
	if !all.Wants("anything", false) || !all.Wants("product.restocked", true) {
		t.Error("a channel without kinds takes every kind")
	}
	off := all
	off.Enabled = false
	if off.Wants("anything", false) || off.Wants("product.restocked", true) {
		t.Error("a disabled channel takes something")
	}
	fp := c.Fingerprint()
	if !strings.HasSuffix(fp, "…Dsaw") || len(fp) != len("0123abcd…Dsaw") || strings.Contains(fp, "AAHdq") {
		t.Errorf("fingerprint %q", fp)
	}
	short := domain.SecretFingerprint("0123456789a")
	if strings.Contains(short, "789a") || !strings.HasSuffix(short, "…") {
		t.Errorf("a short secret's fingerprint %q shows its end", short)
	}
	if domain.SecretFingerprint("") != "" {
		t.Error("no secret, yet a fingerprint")
	}
}
