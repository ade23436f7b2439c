package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// paidThrough places an order of qty and pays it through the scripted provider.
func paidThrough(t *testing.T, f *fixture, gw *scriptedGateway, pid domain.ProductID, buyer domain.BuyerID, qty int) domain.Order {
	t.Helper()
	o := f.mustPlace(t, buyer, pid, qty)
	mustCreatePayment(t, f, o, string(gw.name))
	if _, err := f.shop.HandleNotification(f.ctx, gw.name, notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("pay %s: %v", o.No(), err)
	}
	return f.order(t, o.No())
}

func payment(t *testing.T, f *fixture, no domain.OrderNo) domain.Payment {
	t.Helper()
	ps, err := f.shop.Payments(f.ctx, no)
	if err != nil || len(ps) != 1 {
		t.Fatalf("payments of %s: %+v, %v", no, ps, err)
	}
	return ps[0]
}

// A refund returns the money through the provider first, once, then the codes.
func TestRefundReturnsTheMoneyThroughTheProvider(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := paidThrough(t, f, gw, p.ID(), "alice", 2)
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Order.Status() != domain.StatusRefunded || res.Money.Status != domain.PaymentRefunded ||
		res.Money.RefundNo != domain.RefundNoOf(o.No()) || res.Money.Ref == "" || res.Recycled != 2 {
		t.Fatalf("refund = %+v, %v", res, err)
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunded {
		t.Fatalf("payment %s, want REFUNDED", pay.Status)
	}
	again, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || again.Order.Status() != domain.StatusRefunded || gw.calls.Load() != 1 {
		t.Fatalf("a second refund = %+v, %v after %d provider calls; want the first's answer and no new call", again, err, gw.calls.Load())
	}
	f.assertInvariants(t, p.ID())
}

// A refused refund leaves the order PAID with its codes, the payment REFUND_FAILED and an
// alert; the operator's next try sends the same refund number.
func TestRefundRefusedByTheProvider(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := paidThrough(t, f, gw, p.ID(), "alice", 1)
	gw.set(func(g *scriptedGateway) { g.refund = "refuse" })
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	is(t, "a refused refund", err, domain.ErrRefundRefused)
	if res.Money.Status != domain.PaymentRefundFailed || res.Money.Reason != "insufficient balance" {
		t.Fatalf("money = %+v", res.Money)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid || f.alertCount("refund_failed") != 1 {
		t.Fatalf("order %s, %d refund_failed alerts; want PAID and one alert", got.Status(), f.alertCount("refund_failed"))
	}
	f.assertInvariants(t, p.ID())
	gw.set(func(g *scriptedGateway) { g.refund = "" })
	res, err = f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Order.Status() != domain.StatusRefunded || res.Money.RefundNo != string(o.No())+"R2" {
		t.Fatalf("the retry = %+v, %v; want REFUNDED under the next refund number", res, err)
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	f.assertInvariants(t, p.ID())
}

// A provider that cannot be reached keeps the refund pending (REFUNDING, alert, 503); the
// retry pays out once.
func TestRefundTimeoutThenRetry(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := paidThrough(t, f, gw, p.ID(), "alice", 2)
	gw.set(func(g *scriptedGateway) { g.down = true })
	_, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true})
	is(t, "a refund while the provider is down", err, domain.ErrUnavailable)
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunding || pay.RefundNo != domain.RefundNoOf(o.No()) {
		t.Fatalf("payment %+v, want REFUNDING with its refund number", pay)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid || f.alertCount("refund_pending") != 1 {
		t.Fatalf("order %s after an unsent refund, want PAID (and one refund_pending alert)", got.Status())
	}
	gw.set(func(g *scriptedGateway) { g.down = false })
	for range 3 {
		res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true})
		if err != nil || res.Order.Status() != domain.StatusRefunded {
			t.Fatalf("retry = %+v, %v", res, err)
		}
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	f.assertInvariants(t, p.ID())
}

// A refund the provider finishes later: REFUNDING until its notification, then the codes go.
func TestRefundPendingUntilTheProviderNotifies(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := paidThrough(t, f, gw, p.ID(), "alice", 1)
	gw.set(func(g *scriptedGateway) { g.refund = "pending" })
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Money.Status != domain.PaymentRefunding || res.Order.Status() != domain.StatusPaid {
		t.Fatalf("pending refund = %+v, %v", res, err)
	}
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(o.No()), Ref: "rf", Event: "evt-refund", RefundNo: domain.RefundNoOf(o.No()), Refund: "succeeded"})
	in := domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}
	if _, err := f.shop.HandleNotification(f.ctx, "acme", in, ""); err != nil {
		t.Fatalf("refund notification: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusRefunded {
		t.Fatalf("order %s after the refund notification, want REFUNDED", got.Status())
	}
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunded {
		t.Fatalf("payment %s, want REFUNDED", pay.Status)
	}
	// A notification about another refund number is refused.
	b, _ = json.Marshal(scriptedNotice{OrderNo: string(o.No()), Event: "evt-x", RefundNo: "other", Refund: "succeeded"})
	in.Body = b
	if _, err := f.shop.HandleNotification(f.ctx, "acme", in, ""); err == nil {
		t.Fatal("a notification of an unknown refund was accepted")
	}
	f.assertInvariants(t, p.ID())
}

// Operators refunding at once, and a refund racing a late payment's fulfilment: the money is
// returned once and the codes released once.
func TestConcurrentRefundsPayOutOnce(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 10)
	o := paidThrough(t, f, gw, p.ID(), "alice", 2)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
			if err != nil && !errors.Is(err, domain.ErrUnavailable) {
				t.Errorf("refund: %v", err)
			}
			_ = res
		})
	}
	wg.Wait()
	if _, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusRefunded || gw.paidOut(o.No()) != 1 {
		t.Fatalf("order %s, paid out %d times; want REFUNDED once", got.Status(), gw.paidOut(o.No()))
	}
	f.assertInvariants(t, p.ID())

	// A late payment for an order whose stock is gone ends UNFULFILLED; then an import and a
	// fulfil race the refund.
	late := f.mustPlace(t, "bob", p.ID(), 2)
	mustCreatePayment(t, f, late, "acme")
	gw.set(func(g *scriptedGateway) { g.noClose = true })
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.CloseExpired(f.ctx, late.No()); err != nil {
		t.Fatal(err)
	}
	lv := f.levels(t, p.ID())
	for range lv.Stock / 2 { // take what is left
		f.mustPlace(t, "carol", p.ID(), 2)
	}
	gw.set(func(g *scriptedGateway) { g.state[late.No()] = domain.OutcomePaid })
	if _, err := f.shop.HandleNotification(f.ctx, "acme", notice(late, "paid", late.Amount(), "CNY"), ""); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, late.No()); got.Status() != domain.StatusUnfulfilled && got.Status() != domain.StatusPaid {
		t.Fatalf("late payment ended %s", got.Status())
	}
	f.addCodes(t, p.ID(), 4)
	wg.Go(func() { _, _ = f.shop.FulfilOrder(f.ctx, late.No()) })
	wg.Go(func() { _, _ = f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: late.No()}) })
	wg.Wait()
	if _, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: late.No()}); err != nil {
		t.Fatalf("refund after the race: %v", err)
	}
	if got := f.order(t, late.No()); got.Status() != domain.StatusRefunded || gw.paidOut(late.No()) != 1 {
		t.Fatalf("late order %s, paid out %d times; want REFUNDED once", got.Status(), gw.paidOut(late.No()))
	}
	f.assertInvariants(t, p.ID())
}

// An order paid through the signed callback has no payment at a provider: the refund returns
// the codes only (the storefront returns the money), as before.
func TestRefundOfACallbackPaidOrderMovesNoMoney(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.mustPay(t, o.No())
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Order.Status() != domain.StatusRefunded || res.Money != (application.MoneyRefund{}) || gw.calls.Load() != 0 {
		t.Fatalf("refund = %+v, %v, %d provider calls", res, err, gw.calls.Load())
	}
	f.assertInvariants(t, p.ID())
}

// hookedLedger runs its hook once, just after the next read of an order: what it returns is
// then already out of date, as when a concurrent request changes the order right after.
type hookedLedger struct {
	domain.Ledger
	hook atomic.Pointer[func()]
}

func (l *hookedLedger) Orders() domain.OrderRepo {
	return hookedOrders{OrderRepo: l.Ledger.Orders(), l: l}
}

type hookedOrders struct {
	domain.OrderRepo
	l *hookedLedger
}

func (r hookedOrders) Order(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	o, err := r.OrderRepo.Order(ctx, no)
	if h := r.l.hook.Swap(nil); h != nil {
		(*h)()
	}
	return o, err
}

// A refund that finds the order CLOSED, while the provider's late success pays it before the
// refund decides (a race between an operator and the notification), returns the money before
// the codes: a refund never ends REFUNDED with the buyer's money still at the provider.
func TestRefundOfAnOrderPaidLateMeanwhileReturnsTheMoney(t *testing.T) {
	gw := newScripted("acme")
	hooked := &hookedLedger{}
	f := newFixture(t, withGateways(gw), withLedger(func(l *memory.Ledger) domain.Ledger { hooked.Ledger = l; return hooked }))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")
	gw.set(func(g *scriptedGateway) { g.noClose = true }) // the order closes with its payment open there
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid }) // the buyer paid just in time
	late := func() {
		if _, err := f.shop.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
			t.Errorf("the late success: %v", err)
		}
	}
	hooked.hook.Store(&late)
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Order.Status() != domain.StatusRefunded || res.Money.Status != domain.PaymentRefunded {
		t.Fatalf("refund = %+v, %v; want REFUNDED with the money returned", res, err)
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunded {
		t.Fatalf("payment %s, want REFUNDED", pay.Status)
	}
	f.assertInvariants(t, p.ID())
}

// An order is PAID before its payment's status says so (the notification pays the order, then
// records the payment PAID): a refund in between finds the payment by the order's payment
// reference and returns the money first.
func TestRefundOfAPaidOrderWhosePaymentStatusLags(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	pay := mustCreatePayment(t, f, o, "acme")
	if _, err := f.shop.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: o.Amount(),
		PaymentRef: string(pay.Provider) + ":" + pay.ProviderRef}); err != nil {
		t.Fatal(err)
	}
	if got := payment(t, f, o.No()); got.Status != domain.PaymentOpen {
		t.Fatalf("payment %s, want still OPEN (the window under test)", got.Status)
	}
	res, err := f.shop.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Order.Status() != domain.StatusRefunded || res.Money.Status != domain.PaymentRefunded ||
		res.Money.RefundNo != domain.RefundNoOf(o.No()) {
		t.Fatalf("refund = %+v, %v; want REFUNDED with the money returned", res, err)
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	if got := payment(t, f, o.No()); got.Status != domain.PaymentRefunded {
		t.Fatalf("payment %s, want REFUNDED", got.Status)
	}
	f.assertInvariants(t, p.ID())
}
