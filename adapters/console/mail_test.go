package console_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// mailCounter is the harness's mailer: it keeps what it is given.
type mailCounter struct {
	mu   sync.Mutex
	sent []domain.OrderMail
	fail bool // refuse every mail, as a mail server that is down
}

func (m *mailCounter) SendOrderMail(_ context.Context, mail domain.OrderMail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("smtp: connection refused")
	}
	m.sent = append(m.sent, mail)
	return nil
}

// paidGuestOrder places a guest order of p for the address and pays it.
func (h *harness) paidGuestOrder(p domain.Product, email string) domain.Order {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader("GUEST-CODE-0001\n")); err != nil {
		h.t.Fatal(err)
	}
	g, err := h.shop.Sales.PlaceGuestOrder(ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: email, Lang: "zh-CN",
		IdempotencyKey: "guest-key-0001"})
	if err != nil {
		h.t.Fatal(err)
	}
	o, err := h.shop.Payments.ApplyPayment(ctx, domain.PaymentNotice{OrderNo: g.Order.No(), Paid: true, Amount: g.Order.Amount(),
		PaymentRef: "pay-guest"})
	if err != nil || o.Status() != domain.StatusPaid {
		h.t.Fatalf("pay the guest order: %s %v", o.Status(), err)
	}
	return o
}

func (h *harness) mailMessages(no domain.OrderNo) int {
	h.t.Helper()
	rs, err := h.ledger.Outbox().ByKey(context.Background(), string(no), domain.TopicOrderMail)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(rs)
}

// TestResendEmailFromTheOrderPage: a paid guest order's page shows its address, its e-mail in
// the delivery table and, to an operator, a "Resend e-mail" form with the CSRF token; posting
// it queues the e-mail again, audited as order.mail_resent. A viewer sees no form and is
// refused; an API order's page has none and its post is refused with the API's words. Every
// attempt is audited with its result.
func TestResendEmailFromTheOrderPage(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	guest := h.paidGuestOrder(p, "Buyer@Example.com")
	apiNo := h.paidOrder(p, []string{"API-CODE-0001"}, 1)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	path := "/console/orders/" + string(guest.No())

	page := oper.get(path)
	wantStatus(t, page, 200)
	form := `action="` + path + `/mail"`
	for _, want := range []string{form, "Resend e-mail", "Buyer@example.com", "the buyer&#39;s e-mail", "mail.order.paid", `name="csrf" value="` + oper.csrf + `"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the guest order's page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "GUEST-CODE") {
		t.Fatal("the order's page shows a code")
	}
	if strings.Contains(viewer.get(path).body, form) {
		t.Error("a viewer is offered the resend")
	}
	if strings.Contains(oper.get("/console/orders/"+apiNo).body, form) {
		t.Error("an API order offers an e-mail")
	}

	wantStatus(t, viewer.post(path+"/mail", nil), 403)
	wantStatus(t, oper.postFormNoToken(path+"/mail"), 403)
	if n := h.mailMessages(guest.No()); n != 1 {
		t.Fatalf("%d mail messages after refused resends, want the payment's 1", n)
	}
	r := oper.post(path+"/mail", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "The e-mail is queued") {
		t.Errorf("no notice after the resend: %s", r.body)
	}
	if n := h.mailMessages(guest.No()); n != 2 {
		t.Fatalf("%d mail messages after the resend, want 2", n)
	}
	wantStatus(t, oper.post("/console/orders/"+apiNo+"/mail", nil), 409)
	var resent []string
	for _, e := range h.audit() {
		if e.Action == application.ActionMailResent {
			resent = append(resent, e.Operator+" "+e.Result)
		}
	}
	if want := []string{"otto 409 no_order_mail", "otto 200", "vera 403 forbidden"}; !slices.Equal(resent, want) {
		t.Fatalf("audit of the resends %v, want %v (newest first)", resent, want)
	}
}

// TestOrderPageShowsAGivenUpEmail: an e-mail the relay gave up after its last attempt reads
// "given up" on the order's page, not "sent".
func TestOrderPageShowsAGivenUpEmail(t *testing.T) {
	h := newHarness(t, 0)
	h.mailer.fail = true
	p := h.product("Gift card", 1999)
	guest := h.paidGuestOrder(p, "bounce@example.com")
	for range application.DefaultMailAttempts {
		if _, err := h.shop.Relay.RelayMail(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Hour)
	}
	page := h.login(h.operator("otto", domain.RoleOperator)).get("/console/orders/" + string(guest.No()))
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, "given up") || strings.Contains(page.body, ">sent ") {
		t.Fatalf("the given-up e-mail's row: %s", page.body)
	}
}
