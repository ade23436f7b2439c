package console_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// channelKit configures a made-up provider "acme" (a URL and a key of at least 16
// characters); its query answers "no such order" to the key "good-key-…" and refuses others.
type channelKit struct{}

func (channelKit) Specs() []application.ChannelSpec {
	return []application.ChannelSpec{{Provider: "acme", Fields: []application.ChannelField{
		{Name: "url", Required: true}, {Name: "key", Secret: true, Required: true}}}}
}

func (channelKit) Build(s domain.ChannelSettings) (domain.PaymentGateway, error) {
	if len(s.Secrets["key"]) < 16 {
		return nil, errors.New("acme key must be at least 16 characters")
	}
	return acmeGateway{good: strings.HasPrefix(s.Secrets["key"].Reveal(), "good-key-")}, nil
}

type acmeGateway struct{ good bool }

func (acmeGateway) Provider() domain.Provider     { return "acme" }
func (acmeGateway) Supports(domain.Currency) bool { return true }
func (acmeGateway) Create(context.Context, domain.PaymentRequest) (domain.PaymentCreated, error) {
	return domain.PaymentCreated{}, domain.ErrUnsupported
}
func (acmeGateway) Verify(context.Context, domain.InboundRequest) (domain.ProviderNotice, error) {
	return domain.ProviderNotice{}, domain.ErrBadSignature
}
func (g acmeGateway) Query(context.Context, domain.Payment) (domain.PaymentState, error) {
	if !g.good {
		return domain.PaymentState{}, errors.New("acme query: refused: invalid key")
	}
	return domain.PaymentState{}, domain.ErrPaymentNotFound
}
func (acmeGateway) Close(context.Context, domain.Payment) error { return domain.ErrUnsupported }
func (acmeGateway) Refund(context.Context, domain.Payment, domain.RefundRequest) (domain.RefundState, error) {
	return domain.RefundState{}, domain.ErrUnsupported
}
func (acmeGateway) RefundIdempotent() bool { return false }

// The Payments screens are an admin's: an operator gets 403 on the page and on a save (the
// save recorded as refused); an admin's refused save shows the adapter's words and stores
// nothing; a good one stores it, shows a fingerprint and never the key; the test button tells
// a wrong key from a right one; the audit log has every step and never a key.
func TestPaymentChannelsScreens(t *testing.T) {
	h := newHarness(t, 0)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	wantStatus(t, oper.get("/console/payments"), 403)
	wantStatus(t, oper.post("/console/payments/acme", url.Values{"f_url": {"https://acme.example"}}), 403)
	if e := h.audit()[0]; e.Action != application.ActionChannelSave || !strings.HasPrefix(e.Result, "403") {
		t.Fatalf("the operator's save is audited as %+v", e)
	}

	admin := h.login(h.operator("ada", domain.RoleAdmin))
	page := admin.get("/console/payments")
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, `id="channel-acme"`) || !strings.Contains(page.body, "Not configured") {
		t.Fatalf("the list: %s", page.body)
	}
	r := admin.post("/console/payments/acme", url.Values{"version": {"0"}, "enabled": {"on"}, "f_url": {"https://acme.example"}, "s_key": {"short"}})
	wantStatus(t, r, 400)
	if !strings.Contains(r.body, "acme key must be at least 16 characters") || !strings.Contains(r.body, "https://acme.example") {
		t.Fatalf("the refused save: %s", r.body)
	}
	if views, _ := h.shop.Channels.List(context.Background()); views[0].Version != 0 {
		t.Fatalf("a refused save stored %+v", views[0])
	}
	for _, key := range []string{"wrong-key-0123456789", "good-key-0123456789abcd"} {
		version := "0"
		if strings.HasPrefix(key, "good") {
			version = "1"
		}
		r = admin.post("/console/payments/acme", url.Values{"version": {version}, "enabled": {"on"}, "f_url": {"https://acme.example"}, "s_key": {key}})
		wantStatus(t, r, 200)
		if strings.Contains(r.body, key) || !strings.Contains(r.body, "sha256:") {
			t.Fatalf("the list after a save shows the key or no fingerprint: %s", r.body)
		}
		r = admin.post("/console/payments/acme/test", nil)
		wantStatus(t, r, 200)
		want := "test-bad"
		if strings.HasPrefix(key, "good") {
			want = "test-ok"
		}
		if !strings.Contains(r.body, want) {
			t.Fatalf("the test with %s: want %s: %s", key, want, r.body)
		}
	}
	if got := h.shop.Payments.Providers(); len(got) != 1 || got[0] != "acme" {
		t.Fatalf("providers %v, want acme", got)
	}
	wantStatus(t, admin.post("/console/payments/acme/disable", url.Values{"version": {"2"}}), 200)
	if got := h.shop.Payments.Providers(); len(got) != 0 {
		t.Fatalf("providers %v after the disable", got)
	}
	actions := map[string]int{}
	for _, e := range h.audit() {
		actions[e.Action]++
		for _, secret := range []string{"short", "wrong-key-0123456789", "good-key-0123456789abcd"} {
			if strings.Contains(e.Params, secret) {
				t.Fatalf("an audit entry holds a key: %+v", e)
			}
		}
	}
	if actions[application.ActionChannelSave] != 4 || actions[application.ActionChannelTest] != 2 || actions[application.ActionChannelDisable] != 1 {
		t.Fatalf("audited actions %v", actions)
	}
	if strings.Contains(h.logs.String(), "good-key-0123") || strings.Contains(h.logs.String(), "wrong-key-0123") {
		t.Fatal("a log line holds a key")
	}
}
