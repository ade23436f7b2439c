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
	if err := f.shop.Payments.HandleNotification(f.ctx, gw.name, notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("pay %s: %v", o.No(), err)
	}
	return f.order(t, o.No())
}

func payment(t *testing.T, f *fixture, no domain.OrderNo) domain.Payment {
	t.Helper()
	ps, err := f.shop.Payments.OrderPayments(f.ctx, no)
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
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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
	again, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	is(t, "a refused refund", err, domain.ErrRefundRefused)
	if res.Money.Status != domain.PaymentRefundFailed || res.Money.Reason != "insufficient balance" {
		t.Fatalf("money = %+v", res.Money)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid || f.alertCount("refund_failed") != 1 {
		t.Fatalf("order %s, %d refund_failed alerts; want PAID and one alert", got.Status(), f.alertCount("refund_failed"))
	}
	f.assertInvariants(t, p.ID())
	gw.set(func(g *scriptedGateway) { g.refund = "" })
	res, err = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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
	_, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true})
	is(t, "a refund while the provider is down", err, domain.ErrUnavailable)
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunding || pay.RefundNo != domain.RefundNoOf(o.No()) {
		t.Fatalf("payment %+v, want REFUNDING with its refund number", pay)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid || f.alertCount("refund_pending") != 1 {
		t.Fatalf("order %s after an unsent refund, want PAID (and one refund_pending alert)", got.Status())
	}
	gw.set(func(g *scriptedGateway) { g.down = false })
	for range 3 {
		res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true})
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
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Money.Status != domain.PaymentRefunding || res.Order.Status() != domain.StatusPaid {
		t.Fatalf("pending refund = %+v, %v", res, err)
	}
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(o.No()), Ref: "rf", Event: "evt-refund", RefundNo: domain.RefundNoOf(o.No()), Refund: "succeeded"})
	in := domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", in, ""); err != nil {
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
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", in, ""); err == nil {
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
			res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
			if err != nil && !errors.Is(err, domain.ErrUnavailable) {
				t.Errorf("refund: %v", err)
			}
			_ = res
		})
	}
	wg.Wait()
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil {
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
	if err := f.shop.Sales.CloseExpired(f.ctx, late.No()); err != nil {
		t.Fatal(err)
	}
	lv := f.levels(t, p.ID())
	for range lv.Stock / 2 { // take what is left
		f.mustPlace(t, "carol", p.ID(), 2)
	}
	gw.set(func(g *scriptedGateway) { g.state[late.No()] = domain.OutcomePaid })
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(late, "paid", late.Amount(), "CNY"), ""); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, late.No()); got.Status() != domain.StatusUnfulfilled && got.Status() != domain.StatusPaid {
		t.Fatalf("late payment ended %s", got.Status())
	}
	f.addCodes(t, p.ID(), 4)
	wg.Go(func() { _, _ = f.shop.Sales.FulfilOrder(f.ctx, late.No()) })
	wg.Go(func() { _, _ = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: late.No()}) })
	wg.Wait()
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: late.No()}); err != nil {
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
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid }) // the buyer paid just in time
	late := func() {
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
			t.Errorf("the late success: %v", err)
		}
	}
	hooked.hook.Store(&late)
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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
	if _, err := f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: o.Amount(),
		PaymentRef: string(pay.Provider) + ":" + pay.ProviderRef}); err != nil {
		t.Fatal(err)
	}
	if got := payment(t, f, o.No()); got.Status != domain.PaymentOpen {
		t.Fatalf("payment %s, want still OPEN (the window under test)", got.Status)
	}
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
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

// refundNotice is the scripted provider's signed notification that the order's refund R1 ended
// with outcome.
func refundNotice(o domain.Order, outcome string) domain.InboundRequest {
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(o.No()), Ref: "rf", Event: "evt-refund-" + outcome,
		RefundNo: domain.RefundNoOf(o.No()), Refund: outcome})
	return domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}
}

// A refund the provider finishes later is completed with the operator's decision about the
// codes, stored with it: void keeps codes nobody saw out of the pool, recycle returns codes the
// buyer read, and the operator's reason stays the order's, whoever completes the refund (the
// provider's notification, or the operator's next refund without flags).
func TestPendingRefundFinishesWithTheOperatorsDecision(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cmd      application.Refund
		reveal   bool
		byNotice bool
		voided   int
		recycled int
	}{
		{"void, completed by the notification", application.Refund{Void: true, Reason: "chargeback risk"}, false, true, 2, 0},
		{"recycle, completed by the notification", application.Refund{Recycle: true, Reason: "never used"}, true, true, 0, 2},
		{"void, completed by the next refund", application.Refund{Void: true, Reason: "chargeback risk"}, false, false, 2, 0},
		{"recycle, completed by the next refund", application.Refund{Recycle: true, Reason: "never used"}, true, false, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := newScripted("acme")
			f := newFixture(t, withGateways(gw))
			p := f.createProduct(t, 2, 5)
			o := paidThrough(t, f, gw, p.ID(), "alice", 2)
			if tc.reveal {
				if _, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No()); err != nil {
					t.Fatal(err)
				}
			}
			gw.set(func(g *scriptedGateway) { g.refund = "pending" })
			cmd := tc.cmd
			cmd.OrderNo = o.No()
			res, err := f.shop.Payments.RefundOrder(f.ctx, cmd)
			if err != nil || res.Money.Status != domain.PaymentRefunding || res.Order.Status() != domain.StatusPaid {
				t.Fatalf("pending refund = %+v, %v", res, err)
			}
			if tc.byNotice {
				if err := f.shop.Payments.HandleNotification(f.ctx, "acme", refundNotice(o, "succeeded"), ""); err != nil {
					t.Fatalf("refund notification: %v", err)
				}
			} else {
				gw.set(func(g *scriptedGateway) { g.refund = "" })
				if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil {
					t.Fatalf("the next refund: %v", err)
				}
			}
			got := f.order(t, o.No())
			if got.Status() != domain.StatusRefunded || got.Reason() != cmd.Reason {
				t.Fatalf("order %s (%q) after the refund completed, want REFUNDED with the operator's reason %q", got.Status(), got.Reason(), cmd.Reason)
			}
			done, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
			if err != nil || done.Voided != tc.voided || done.Recycled != tc.recycled {
				t.Fatalf("refund answered %+v, %v; want %d voided and %d recycled", done, err, tc.voided, tc.recycled)
			}
			c := f.counts(t, p.ID())
			if c[domain.CardVoid] != int64(tc.voided) || c[domain.CardRecycled] != int64(tc.recycled) {
				t.Fatalf("pool %v; want %d VOID and %d RECYCLED", c, tc.voided, tc.recycled)
			}
			if gw.paidOut(o.No()) > 1 {
				t.Fatalf("money returned %d times", gw.paidOut(o.No()))
			}
			if pay := payment(t, f, o.No()); pay.Status != domain.PaymentRefunded || pay.RefundVoid != cmd.Void ||
				pay.RefundRecycle != cmd.Recycle || pay.RefundNote != cmd.Reason {
				t.Fatalf("payment %+v: want REFUNDED with the operator's decision", pay)
			}
			f.assertInvariants(t, p.ID())
		})
	}
}

// A provider without refund numbers (epay: its check of the order and its payout are two
// steps) is called by one refund at a time: of eight operators refunding at once, the one that
// took the refund calls it, the others answer REFUNDING; the money goes back once.
func TestConcurrentRefundsAtAProviderWithoutRefundNumbersPayOutOnce(t *testing.T) {
	gw := newScripted("acme")
	gw.set(func(g *scriptedGateway) { g.checkThenPay, g.gap = true, 50*time.Millisecond })
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 10)
	o := paidThrough(t, f, gw, p.ID(), "alice", 2)
	var wg sync.WaitGroup
	var refunded, pending atomic.Int32
	for range 8 {
		wg.Go(func() {
			res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true})
			switch {
			case err != nil:
				t.Errorf("refund: %v", err)
			case res.Order.Status() == domain.StatusRefunded:
				refunded.Add(1)
			case res.Money.Status == domain.PaymentRefunding:
				pending.Add(1)
			default:
				t.Errorf("refund answered %+v", res)
			}
		})
	}
	wg.Wait()
	if gw.paidOut(o.No()) != 1 || gw.calls.Load() != 1 || refunded.Load() < 1 || refunded.Load()+pending.Load() != 8 {
		t.Fatalf("paid out %d times in %d calls; %d refunds answered REFUNDED, %d REFUNDING; want one payout and one call",
			gw.paidOut(o.No()), gw.calls.Load(), refunded.Load(), pending.Load())
	}
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil || res.Order.Status() != domain.StatusRefunded || res.Voided != 2 {
		t.Fatalf("refund after the race = %+v, %v", res, err)
	}
	f.assertInvariants(t, p.ID())
}

// At a provider without refund numbers, a refund whose call brought no answer gives the
// payment back (PAID, not REFUNDING held by nobody), so the operator's retry sends again; the
// provider's check of its order keeps that retry from paying twice.
func TestRefundWithoutRefundNumbersTimeoutThenRetry(t *testing.T) {
	gw := newScripted("acme")
	gw.set(func(g *scriptedGateway) { g.checkThenPay = true })
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := paidThrough(t, f, gw, p.ID(), "alice", 2)
	gw.set(func(g *scriptedGateway) { g.down = true })
	_, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Recycle: true})
	is(t, "a refund while the provider is down", err, domain.ErrUnavailable)
	if pay := payment(t, f, o.No()); pay.Status != domain.PaymentPaid || f.alertCount("refund_pending") != 1 {
		t.Fatalf("payment %+v after an unsent refund, want PAID again (and one refund_pending alert)", pay)
	}
	gw.set(func(g *scriptedGateway) { g.down = false })
	for range 2 {
		res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Recycle: true})
		if err != nil || res.Order.Status() != domain.StatusRefunded || res.Recycled != 2 {
			t.Fatalf("retry = %+v, %v", res, err)
		}
	}
	if gw.paidOut(o.No()) != 1 {
		t.Fatalf("money returned %d times, want once", gw.paidOut(o.No()))
	}
	f.assertInvariants(t, p.ID())
}

// unfulfilledThrough has the scripted provider pay an order late, after it closed and another
// buyer took its stock: UNFULFILLED, its payment PAID.
func unfulfilledThrough(t *testing.T, f *fixture, gw *scriptedGateway) (domain.Product, domain.Order) {
	t.Helper()
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	mustCreatePayment(t, f, o, string(gw.name))
	gw.set(func(g *scriptedGateway) { g.noClose = true }) // the order closes with its payment open there
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	f.mustPlace(t, "carol", p.ID(), 2)
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	if err := f.shop.Payments.HandleNotification(f.ctx, gw.name, notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("pay %s: %v", o.No(), err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("order %s, want UNFULFILLED", got.Status())
	}
	return p, o
}

// An UNFULFILLED order whose refund is pending at the provider is not fulfilled, even once
// stock is back: the buyer would read working codes and get the money back. The refund then
// completes with no codes; an order whose refund the provider refused may be fulfilled.
func TestFulfilRefusedWhileTheRefundIsPending(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p, o := unfulfilledThrough(t, f, gw)
	gw.set(func(g *scriptedGateway) { g.refund = "pending" })
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil || res.Money.Status != domain.PaymentRefunding {
		t.Fatalf("pending refund = %+v, %v", res, err)
	}
	f.addCodes(t, p.ID(), 5)
	before := f.counts(t, p.ID())
	got, err := f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil while the refund is pending", err, domain.ErrRefundInProgress)
	if got.Status() != domain.StatusUnfulfilled || f.order(t, o.No()).Status() != domain.StatusUnfulfilled {
		t.Fatalf("order %s after the refused fulfil, want UNFULFILLED", f.order(t, o.No()).Status())
	}
	if after := f.counts(t, p.ID()); after[domain.CardSold] != before[domain.CardSold] || len(f.soldCards(t, o.No())) != 0 {
		t.Fatalf("pool %v after the refused fulfil (was %v): nothing may be allocated", after, before)
	}
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", refundNotice(o, "succeeded"), ""); err != nil {
		t.Fatalf("refund notification: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusRefunded {
		t.Fatalf("order %s after the refund's notification, want REFUNDED", got.Status())
	}
	f.assertInvariants(t, p.ID())

	// A refused refund leaves the order to fulfil.
	gw2 := newScripted("acme")
	g := newFixture(t, withGateways(gw2))
	p2, o2 := unfulfilledThrough(t, g, gw2)
	gw2.set(func(g *scriptedGateway) { g.refund = "refuse" })
	_, err = g.shop.Payments.RefundOrder(g.ctx, application.Refund{OrderNo: o2.No()})
	is(t, "a refused refund", err, domain.ErrRefundRefused)
	g.addCodesHeld(t, p2.ID(), 5)
	if got, err := g.shop.Sales.FulfilOrder(g.ctx, o2.No()); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("fulfil after a refused refund = %s, %v; want PAID", got.Status(), err)
	}
	g.assertInvariants(t, p2.ID())
}

// paymentHookLedger runs its hook once, just after the next read of an order's payments (outside
// a transaction): what that read returned is then out of date.
type paymentHookLedger struct {
	domain.Ledger
	hook atomic.Pointer[func()]
}

func (l *paymentHookLedger) Payments() domain.PaymentRepo {
	return hookedPayments{PaymentRepo: l.Ledger.Payments(), l: l}
}

type hookedPayments struct {
	domain.PaymentRepo
	l *paymentHookLedger
}

func (r hookedPayments) OfOrder(ctx context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	ps, err := r.PaymentRepo.OfOrder(ctx, no)
	if h := r.l.hook.Swap(nil); h != nil {
		(*h)()
	}
	return ps, err
}

// A refund that takes the payment after the fulfil checked it, before the fulfil's transaction,
// still stops the fulfil: the transaction reads the payment again and holds it.
func TestFulfilLosesToARefundBetweenItsCheckAndItsTransaction(t *testing.T) {
	gw := newScripted("acme")
	hooked := &paymentHookLedger{}
	f := newFixture(t, withGateways(gw), withLedger(func(l *memory.Ledger) domain.Ledger { hooked.Ledger = l; return hooked }))
	p, o := unfulfilledThrough(t, f, gw)
	f.addCodesHeld(t, p.ID(), 5)
	gw.set(func(g *scriptedGateway) { g.refund = "pending" })
	refund := func() {
		if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true}); err != nil || res.Money.Status != domain.PaymentRefunding {
			t.Errorf("the refund in between = %+v, %v", res, err)
		}
	}
	hooked.hook.Store(&refund)
	_, err := f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "a fulfil whose payment a refund took meanwhile", err, domain.ErrRefundInProgress)
	if got := f.order(t, o.No()); got.Status() != domain.StatusUnfulfilled || len(f.soldCards(t, o.No())) != 0 {
		t.Fatalf("order %s with %d codes; want UNFULFILLED with none", got.Status(), len(f.soldCards(t, o.No())))
	}
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", refundNotice(o, "succeeded"), ""); err != nil {
		t.Fatalf("refund notification: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusRefunded {
		t.Fatalf("order %s after the refund's notification, want REFUNDED", got.Status())
	}
	f.assertInvariants(t, p.ID())
}
