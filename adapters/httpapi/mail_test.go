package httpapi_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// mailCounter is a mailer that counts what it is given.
type mailCounter struct {
	mu   sync.Mutex
	sent []domain.OrderMail
}

func (m *mailCounter) SendOrderMail(_ context.Context, mail domain.OrderMail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, mail)
	return nil
}

// paidGuestOrder stores a guest order of product 1 and pays it.
func (h *harness) paidGuestOrder(email domain.Email) domain.Order {
	h.t.Helper()
	p, err := h.ledger.Products().Product(h.t.Context(), 1)
	if err != nil {
		h.t.Fatal(err)
	}
	o, err := domain.NewOrder("2503011200001234000000000001", domain.GuestBuyer(email), p, 1, "guest-key-0001", start, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	if o, err = o.WithGuest(domain.Guest{Email: email, Lang: "en", AccessHash: sha256.Sum256([]byte("s"))}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.Orders().Insert(h.t.Context(), o); err != nil {
		h.t.Fatal(err)
	}
	paid, err := h.shop.Payments.ApplyPayment(h.t.Context(), domain.PaymentNotice{OrderNo: o.No(), Paid: true,
		Amount: o.Amount(), PaymentRef: "pay-guest"})
	if err != nil || paid.Status() != domain.StatusPaid {
		h.t.Fatalf("pay the guest order: %v %v", paid.Status(), err)
	}
	return paid
}

// TestResendOrderMail: an operator queues a paid guest order's e-mail again (202, sent by the
// relay with the same ID); a viewer may not; an API order and a missing one have none to send;
// every attempt is audited as order.mail_resent with its result.
func TestResendOrderMail(t *testing.T) {
	mailer := &mailCounter{}
	h := newHarnessWith(t, func(d *application.Deps) { d.Mailer = mailer })
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("M", 5)...)
	guest := h.paidGuestOrder("guest@example.com")
	api := h.placeOrder(h.token("buyer-1"), "key-mail-0001", 1, 1)
	h.pay(api)
	olga := h.newOperator("olga", "operator")
	vic := h.newOperator("vic", "viewer")
	path := "/admin/orders/" + string(guest.No()) + "/mail"

	wantError(t, h.as(vic, "POST", path, ""), 403, "forbidden")
	wantError(t, h.as(olga, "POST", "/admin/orders/"+api.OrderNo+"/mail", ""), 409, "no_order_mail")
	wantError(t, h.as(olga, "POST", "/admin/orders/2503011200001234999999999999/mail", ""), 404, "order_not_found")
	r := h.as(olga, "POST", path, "")
	wantStatus(t, r, 202)
	var body struct {
		OrderNo string `json:"order_no"`
		Queued  bool   `json:"queued"`
	}
	r.decode(t, &body)
	if body.OrderNo != string(guest.No()) || !body.Queued {
		t.Fatalf("answer %s", r.body)
	}
	entries := h.auditOf(application.ActionMailResent).Entries
	var results []string
	for _, e := range entries {
		results = append(results, e.Operator+" "+e.Result)
	}
	want := []string{"olga 202", "olga 404 order_not_found", "olga 409 no_order_mail", "vic 403 forbidden"}
	if !slices.Equal(results, want) || entries[0].Target != "order "+string(guest.No()) {
		t.Fatalf("audit entries %v, want %v (newest first)", results, want)
	}
	if _, err := h.shop.Relay.RelayMail(t.Context()); err != nil {
		t.Fatal(err)
	}
	mailer.mu.Lock()
	defer mailer.mu.Unlock()
	if len(mailer.sent) != 2 || mailer.sent[0].ID != mailer.sent[1].ID || mailer.sent[0].OrderNo != guest.No() {
		t.Fatalf("mails after the payment and a resend: %+v", mailer.sent)
	}
}
