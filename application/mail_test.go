package application_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// recordingMailer is a test double of the SMTP mailer: it records every mail it accepts and
// fails while failing says so.
type recordingMailer struct {
	mu       sync.Mutex
	sent     []domain.OrderMail
	attempts int
	failing  func(domain.OrderMail) bool
}

func (m *recordingMailer) SendOrderMail(_ context.Context, mail domain.OrderMail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts++
	if m.failing != nil && m.failing(mail) {
		return errors.New("smtp: 451 try again later")
	}
	m.sent = append(m.sent, mail)
	return nil
}

// mails returns the mails sent to the order.
func (m *recordingMailer) mails(no domain.OrderNo) []domain.OrderMail {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []domain.OrderMail
	for _, x := range m.sent {
		if x.OrderNo == no {
			out = append(out, x)
		}
	}
	return out
}

func (m *recordingMailer) setFailing(fn func(domain.OrderMail) bool) {
	m.mu.Lock()
	m.failing = fn
	m.mu.Unlock()
}

// withMailCodes makes the e-mails carry the codes (the default, said where a test counts on it).
func withMailCodes() option { return withConfig(func(c *application.Config) { c.MailCodes = true }) }

// mailMessages lists the order's e-mail messages in the outbox.
func (f *fixture) mailMessages(t tester, no domain.OrderNo) []domain.OutboxRecord {
	t.Helper()
	rs, err := f.ledger.Outbox().ByKey(f.ctx, string(no), domain.TopicOrderMail)
	if err != nil {
		t.Fatalf("outbox of %s: %v", no, err)
	}
	return rs
}

func (f *fixture) relayMail(t tester) int {
	t.Helper()
	n, err := f.shop.Relay.RelayMail(f.ctx)
	if err != nil {
		t.Fatalf("relay mail: %v", err)
	}
	return n
}

func codesOf(cards []domain.Card) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i] = c.Code.Reveal()
	}
	slices.Sort(out)
	return out
}

func TestPayingAGuestOrderRecordsOneMail(t *testing.T) {
	f := newFixture(t, withGuests(), withMailer(&recordingMailer{}))
	p := f.createProduct(t, 5, 20)
	byNotice := f.placeGuest(t, p.ID(), 1, "a@example.com")
	byCallback := f.placeGuest(t, p.ID(), 1, "b@example.com")
	unpaid := f.placeGuest(t, p.ID(), 1, "c@example.com")
	closed := f.placeGuest(t, p.ID(), 1, "d@example.com")
	api := f.mustPlace(t, "api-buyer", p.ID(), 1)

	f.mustPay(t, byNotice.Order.No())
	if _, err := f.payByCallback(t, byCallback.Order.No()); err != nil {
		t.Fatal(err)
	}
	f.mustPay(t, byNotice.Order.No()) // a repeated notice pays nothing twice
	f.mustPay(t, api.No())
	f.clock.Advance(f.cfg.OrderTimeout + time.Minute)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.order(t, closed.Order.No()).Status(); st != domain.StatusClosed {
		t.Fatalf("the unpaid order is %s after its timeout", st)
	}

	for _, no := range []domain.OrderNo{byNotice.Order.No(), byCallback.Order.No()} {
		if n := len(f.mailMessages(t, no)); n != 1 {
			t.Errorf("paid guest order %s has %d mail messages, want 1", no, n)
		}
	}
	for _, no := range []domain.OrderNo{unpaid.Order.No(), closed.Order.No(), api.No()} {
		if n := len(f.mailMessages(t, no)); n != 0 {
			t.Errorf("order %s (%s) has %d mail messages, want none", no, f.order(t, no).Status(), n)
		}
	}
}

func TestLatePaymentOfAGuestOrderRecordsItsMail(t *testing.T) {
	f := newFixture(t, withGuests(), withMailer(&recordingMailer{}))
	p := f.createProduct(t, 5, 20)
	g := f.placeGuest(t, p.ID(), 1, "late@example.com")
	f.clock.Advance(f.cfg.OrderTimeout + time.Minute)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	if o := f.mustPay(t, g.Order.No()); o.Status() != domain.StatusPaid {
		t.Fatalf("late payment left the order %s", o.Status())
	}
	if n := len(f.mailMessages(t, g.Order.No())); n != 1 {
		t.Errorf("late-paid guest order has %d mail messages, want 1", n)
	}
}

func TestNoMailerRecordsNoMail(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 20)
	g := f.placeGuest(t, p.ID(), 1, "a@example.com")
	f.mustPay(t, g.Order.No())
	if n := len(f.mailMessages(t, g.Order.No())); n != 0 {
		t.Errorf("%d mail messages without a mailer", n)
	}
	err := f.shop.Sales.ResendOrderMail(f.ctx, g.Order.No(), application.Identity{Name: "olga", Role: domain.RoleAdmin})
	if !errors.Is(err, domain.ErrMailNotConfigured) {
		t.Errorf("resend without a mailer: %v", err)
	}
}

func TestRelayMailSendsEachPaidOrderItsOwnCodes(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, withGuests(), withMailCodes(), withMailer(mailer))
	p := f.createProduct(t, 5, 40)
	var paid []application.GuestPlaced
	for i := range 6 {
		g := f.placeGuest(t, p.ID(), 1+i%3, "buyer@example.com")
		f.mustPay(t, g.Order.No())
		paid = append(paid, g)
	}
	unpaid := f.placeGuest(t, p.ID(), 1, "buyer@example.com")
	if n := f.relayMail(t); n != len(paid) {
		t.Errorf("relayed %d mails, want %d", n, len(paid))
	}
	if n := f.relayMail(t); n != 0 {
		t.Errorf("a second pass sent %d more", n)
	}
	for _, g := range paid {
		no := g.Order.No()
		mails := mailer.mails(no)
		if len(mails) != 1 {
			t.Fatalf("order %s got %d mails", no, len(mails))
		}
		m := mails[0]
		want := codesOf(f.soldCards(t, no))
		got := slices.Sorted(slices.Values(m.Codes))
		if !slices.Equal(got, want) || len(got) != g.Order.Qty() {
			t.Errorf("order %s mailed codes %v, its codes are %v", no, got, want)
		}
		if m.ID != "order-"+string(no) || m.To != "buyer@example.com" || m.Lang != "en" || m.Qty != g.Order.Qty() ||
			m.Product != p.Name() || m.Amount == "" || m.PaidAt.IsZero() {
			t.Errorf("mail of %s: %+v", no, m)
		}
		if !f.order(t, no).Revealed() {
			t.Errorf("order %s: mailing its codes is a reveal, none recorded", no)
		}
		u, err := url.Parse(m.OrderURL)
		if err != nil || u.Path != "/orders/"+string(no) {
			t.Fatalf("order URL %q", m.OrderURL)
		}
		if key := u.Query().Get("key"); key != g.Secret {
			t.Errorf("the link's key is not the order's secret")
		}
	}
	if len(mailer.mails(unpaid.Order.No())) != 0 {
		t.Error("an unpaid order got a mail")
	}
}

func TestRelayMailWithoutCodesSendsTheLinkAndRevealsNothing(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, withGuests(), withMailer(mailer), withConfig(func(c *application.Config) { c.MailCodes = false }))
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 2, "buyer@example.com")
	f.mustPay(t, g.Order.No())
	f.relayMail(t)
	mails := mailer.mails(g.Order.No())
	if len(mails) != 1 || len(mails[0].Codes) != 0 || !strings.Contains(mails[0].OrderURL, g.Secret) {
		t.Fatalf("mails: %+v", mails)
	}
	if f.order(t, g.Order.No()).Revealed() {
		t.Error("a mail without codes recorded a reveal")
	}
}

func TestRelayMailRetriesWithBackoffThenSends(t *testing.T) {
	mailer := &recordingMailer{}
	mailer.setFailing(func(domain.OrderMail) bool { return true })
	f := newFixture(t, withGuests(), withMailCodes(), withMailer(mailer))
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 1, "buyer@example.com")
	f.mustPay(t, g.Order.No())

	f.relayMail(t)
	if d, err := f.shop.Catalogue.Dashboard(f.ctx); err != nil || d.Mail != 1 {
		t.Fatalf("the dashboard's mail backlog while the server fails: %d, %v", d.Mail, err)
	}
	f.relayMail(t) // not due yet: no second attempt
	if mailer.attempts != 1 {
		t.Fatalf("%d attempts before the backoff ran out, want 1", mailer.attempts)
	}
	f.clock.Advance(time.Minute)
	f.relayMail(t)
	if mailer.attempts != 2 {
		t.Fatalf("%d attempts after the first backoff, want 2", mailer.attempts)
	}
	mailer.setFailing(nil)
	f.clock.Advance(2 * time.Minute)
	if n := f.relayMail(t); n != 1 {
		t.Fatalf("sent %d after the server came back", n)
	}
	if got := mailer.mails(g.Order.No()); len(got) != 1 || got[0].ID != "order-"+string(g.Order.No()) {
		t.Errorf("mails: %+v", got)
	}
	if rs := f.mailMessages(t, g.Order.No()); len(rs) != 1 || f.shop.Sales.MailGivenUp(rs[0]) {
		t.Errorf("a mail sent after two failures counts as given up: %+v", rs)
	}
	if n := f.alertCount(application.AlertMailFailed); n != 0 {
		t.Errorf("%d mail alerts for a mail that went out", n)
	}
	if b, _ := f.shop.Relay.MailBacklog(f.ctx); b != 0 {
		t.Errorf("backlog %d after sending", b)
	}
	if d, err := f.shop.Catalogue.Dashboard(f.ctx); err != nil || d.Mail != 0 {
		t.Errorf("the dashboard's mail backlog after sending: %d, %v", d.Mail, err)
	}
}

func TestRelayMailAlertsAfterTheLastAttemptAndStops(t *testing.T) {
	mailer := &recordingMailer{}
	mailer.setFailing(func(domain.OrderMail) bool { return true })
	f := newFixture(t, withGuests(), withMailer(mailer), withConfig(func(c *application.Config) { c.MailAttempts = 3 }))
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 1, "bounce@example.com")
	f.mustPay(t, g.Order.No())
	for range 10 {
		f.relayMail(t)
		f.clock.Advance(time.Hour)
	}
	if mailer.attempts != 3 {
		t.Errorf("%d attempts, want exactly MailAttempts (3)", mailer.attempts)
	}
	if !hasKind(f.alertsFor(g.Order.No()), application.AlertMailFailed) {
		t.Errorf("no %s alert for the order: %v", application.AlertMailFailed, f.alertsFor(g.Order.No()))
	}
	if b, _ := f.shop.Relay.MailBacklog(f.ctx); b != 0 {
		t.Errorf("a given-up mail still counts in the backlog: %d", b)
	}
	rs, err := f.shop.Sales.OrderDeliveries(f.ctx, g.Order.No())
	if err != nil {
		t.Fatal(err)
	}
	var mails []domain.OutboxRecord
	for _, r := range rs {
		if r.Topic == domain.TopicOrderMail {
			mails = append(mails, r)
		}
	}
	if len(mails) != 1 || mails[0].Attempts != 3 || !f.shop.Sales.MailGivenUp(mails[0]) {
		t.Errorf("the order's mail as its page shows it: %+v", mails)
	}
}

// TestTwoRelaysSendEachMailOnce runs mail relays side by side, as on several instances: every
// paid order gets exactly one mail.
func TestTwoRelaysSendEachMailOnce(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, withGuests(), withMailCodes(), withMailer(mailer))
	p := f.createProduct(t, 5, 200)
	var nos []domain.OrderNo
	for range 60 {
		g := f.placeGuest(t, p.ID(), 1, "many@example.com")
		f.mustPay(t, g.Order.No())
		nos = append(nos, g.Order.No())
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.shop.Relay.RelayMail(f.ctx); err != nil {
				t.Errorf("relay: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, no := range nos {
		if n := len(mailer.mails(no)); n != 1 {
			t.Errorf("order %s got %d mails", no, n)
		}
	}
	if len(mailer.sent) != len(nos) {
		t.Errorf("%d mails for %d orders", len(mailer.sent), len(nos))
	}
}

func TestResendOrderMail(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, withGuests(), withMailer(mailer))
	p := f.createProduct(t, 5, 20)
	g := f.placeGuest(t, p.ID(), 1, "again@example.com")
	unpaid := f.placeGuest(t, p.ID(), 1, "again@example.com")
	api := f.mustPlace(t, "api-buyer", p.ID(), 1)
	f.mustPay(t, g.Order.No())
	f.mustPay(t, api.No())
	f.relayMail(t)

	viewer := application.Identity{Name: "vera", Role: domain.RoleViewer}
	if err := f.shop.Sales.ResendOrderMail(f.ctx, g.Order.No(), viewer); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a viewer's resend: %v", err)
	}
	op := application.Identity{Name: "otto", Role: domain.RoleOperator}
	for _, no := range []domain.OrderNo{unpaid.Order.No(), api.No()} {
		if err := f.shop.Sales.ResendOrderMail(f.ctx, no, op); !errors.Is(err, domain.ErrNoOrderMail) {
			t.Errorf("resend for %s: %v", no, err)
		}
	}
	if err := f.shop.Sales.ResendOrderMail(f.ctx, "250301120000000012345678", op); !errors.Is(err, domain.ErrOrderNotFound) {
		t.Errorf("resend for a missing order: %v", err)
	}
	if err := f.shop.Sales.ResendOrderMail(f.ctx, g.Order.No(), op); err != nil {
		t.Fatalf("operator's resend: %v", err)
	}
	f.relayMail(t)
	mails := mailer.mails(g.Order.No())
	if len(mails) != 2 || mails[0].ID != mails[1].ID {
		t.Fatalf("after a resend: %+v", mails)
	}
	if r, ok := application.ActionRole(application.ActionMailResent); !ok || r != domain.RoleOperator {
		t.Errorf("the action's role: %v %v", r, ok)
	}
}

// TestRefundBeforeTheMailSendsNone: an order refunded before its mail went out gets none (its
// codes are no longer its own).
func TestRefundBeforeTheMailSendsNone(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, withGuests(), withMailCodes(), withMailer(mailer))
	p := f.createProduct(t, 5, 20)
	g := f.placeGuest(t, p.ID(), 1, "refund@example.com")
	f.mustPay(t, g.Order.No())
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: g.Order.No(), Reason: "changed mind"}); err != nil {
		t.Fatalf("refund: %v", err)
	}
	f.relayMail(t)
	if n := len(mailer.mails(g.Order.No())); n != 0 {
		t.Errorf("a refunded order got %d mails", n)
	}
	if b, _ := f.shop.Relay.MailBacklog(f.ctx); b != 0 {
		t.Errorf("backlog %d", b)
	}
}

// TestGuestOrderPaysThroughAProvider: a guest order's payment is created with its buyer like
// any order's, and the provider's notification pays it and records its e-mail, once.
func TestGuestOrderPaysThroughAProvider(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGuests(), withGateways(gw), withMailer(&recordingMailer{}))
	p := f.createProduct(t, 2, 5)
	g := f.placeGuest(t, p.ID(), 2, "payer@example.com")
	pay := mustCreatePayment(t, f, g.Order, "acme")
	if pay.Amount != g.Order.Amount() {
		t.Fatalf("payment %+v", pay)
	}
	for range 2 { // the provider notifies twice
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(g.Order, "paid", g.Order.Amount(), "CNY"), ""); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.order(t, g.Order.No()).Status(); st != domain.StatusPaid {
		t.Fatalf("order %s after the notification", st)
	}
	if n := len(f.mailMessages(t, g.Order.No())); n != 1 {
		t.Errorf("%d mail messages, want 1", n)
	}
}

// TestOperatorFulfilOfAGuestOrderRecordsItsMail: a late payment that finds the stock gone
// leaves the guest order UNFULFILLED, without an e-mail; the operator's fulfil, once codes are
// back, pays it and records its e-mail.
func TestOperatorFulfilOfAGuestOrderRecordsItsMail(t *testing.T) {
	f := newFixture(t, withGuests(), withMailer(&recordingMailer{}))
	p := f.createProduct(t, 5, 1)
	g := f.placeGuest(t, p.ID(), 1, "late@example.com")
	f.clock.Advance(f.cfg.OrderTimeout + time.Minute)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	other := f.mustPlace(t, "quick-buyer", p.ID(), 1)
	f.mustPay(t, other.No())
	if o := f.mustPay(t, g.Order.No()); o.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment without stock: %s", o.Status())
	}
	if n := len(f.mailMessages(t, g.Order.No())); n != 0 {
		t.Fatalf("an UNFULFILLED order has %d mail messages", n)
	}
	f.addCodesHeld(t, p.ID(), 1)
	if o, err := f.shop.Sales.FulfilOrder(f.ctx, g.Order.No()); err != nil || o.Status() != domain.StatusPaid {
		t.Fatalf("fulfil: %v %v", o.Status(), err)
	}
	if n := len(f.mailMessages(t, g.Order.No())); n != 1 {
		t.Errorf("the fulfilled guest order has %d mail messages, want 1", n)
	}
}

// TestRestockOfAGuestOrderRecordsItsMail: a guest order left UNFULFILLED by a late payment is
// filled by the import that brings codes back, and its e-mail is recorded then, once.
func TestRestockOfAGuestOrderRecordsItsMail(t *testing.T) {
	f := newFixture(t, withGuests(), withMailer(&recordingMailer{}))
	p := f.createProduct(t, 5, 1)
	g := f.placeGuest(t, p.ID(), 1, "late@example.com")
	f.clock.Advance(f.cfg.OrderTimeout + time.Minute)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.mustPay(t, f.mustPlace(t, "quick-buyer", p.ID(), 1).No())
	if o := f.mustPay(t, g.Order.No()); o.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment without stock: %s", o.Status())
	}
	if rep := f.importLines(t, p.ID(), strings.Join(f.newCodes(2), "\n")); rep.Filled != 1 {
		t.Fatalf("import filled %d orders, want 1", rep.Filled)
	}
	if st := f.order(t, g.Order.No()).Status(); st != domain.StatusPaid {
		t.Fatalf("guest order %s after the restock, want PAID", st)
	}
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil { // finds nothing more to fill
		t.Fatal(err)
	}
	if n := len(f.mailMessages(t, g.Order.No())); n != 1 {
		t.Errorf("the filled guest order has %d mail messages, want 1", n)
	}
	f.assertInvariants(t, p.ID())
}
