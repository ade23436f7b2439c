package application_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

var (
	clerk = application.Identity{Name: "clerk", Role: domain.RoleOperator}
	boss  = application.Identity{Name: "boss", Role: domain.RoleAdmin}
)

func manual(by application.Identity, no domain.OrderNo, ref, override string) application.ManualPaymentRequest {
	return application.ManualPaymentRequest{By: by, OrderNo: no, Provider: "epay", Reference: ref,
		Note: "the buyer sent a screenshot", Override: override}
}

func TestManualConfirmationAsksTheProviderFirst(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 1)

	_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-1", ""))
	is(t, "the provider says pending", err, domain.ErrProviderUnpaid)
	_, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-1", "I saw the money"))
	is(t, "an operator's override", err, domain.ErrForbidden)
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending || f.alertCount(domain.AlertManualPayment) != 0 {
		t.Fatalf("a refused confirmation changed the order: %s, %d alerts", got.Status(), f.alertCount(domain.AlertManualPayment))
	}
	if ms, _ := f.ledger.Payments().ManualOf(f.ctx, o.No()); len(ms) != 0 {
		t.Fatalf("a refused confirmation claimed the reference: %+v", ms)
	}

	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	res, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-1", ""))
	is(t, "the provider confirms", err, nil)
	if res.Order.Status() != domain.StatusPaid || res.Order.PaymentRef() != "epay:T-1" || res.Record.Queried != "paid" {
		t.Fatalf("confirmed: %s %q %+v", res.Order.Status(), res.Order.PaymentRef(), res.Record)
	}
	if len(f.soldCards(t, o.No())) != 1 || f.alertCount(domain.AlertManualPayment) != 1 {
		t.Fatalf("codes %d, alerts %d", len(f.soldCards(t, o.No())), f.alertCount(domain.AlertManualPayment))
	}
	_, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-1", ""))
	is(t, "a PAID order", err, domain.ErrInvalidTransition)
	f.assertInvariants(t, p.ID())
}

func TestManualConfirmationAdminOverride(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 2)

	_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(boss, o.No(), "T-9", ""))
	is(t, "an admin without a reason", err, domain.ErrProviderUnpaid)
	res, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(boss, o.No(), "T-9", "bank transfer seen on the statement"))
	is(t, "an admin's override", err, nil)
	if res.Order.Status() != domain.StatusPaid || res.Record.Override == "" || res.Record.Queried != "pending" {
		t.Fatalf("overridden: %s %+v", res.Order.Status(), res.Record)
	}
	ms, err := f.ledger.Payments().ManualOf(f.ctx, o.No())
	if err != nil || len(ms) != 1 || ms[0].Operator != "boss" || ms[0].Override == "" {
		t.Fatalf("recorded %+v, %v", ms, err)
	}
	f.assertInvariants(t, p.ID())
}

func TestManualConfirmationProviderOutOfReach(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	gw.set(func(g *scriptedGateway) { g.down = true })
	_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-2", ""))
	is(t, "an unreachable provider", err, domain.ErrProviderUnpaid)
	other := manual(clerk, o.No(), "T-2", "")
	other.Provider = "bank"
	_, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, other)
	is(t, "a provider not configured", err, domain.ErrProviderUnpaid)

	gw.set(func(g *scriptedGateway) { g.down, g.noQuery = false, true })
	res, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "T-2", ""))
	is(t, "a provider without a query", err, nil)
	if res.Order.Status() != domain.StatusPaid {
		t.Fatalf("order %s", res.Order.Status())
	}
	f.assertInvariants(t, p.ID())
}

func TestManualConfirmationRefusesBadInput(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	for _, r := range []application.ManualPaymentRequest{
		{By: clerk, OrderNo: o.No(), Provider: "epay", Reference: ""},
		{By: clerk, OrderNo: o.No(), Provider: "epay", Reference: "two words"},
		{By: clerk, OrderNo: o.No(), Provider: "EPAY!", Reference: "T-3"},
		{By: clerk, OrderNo: o.No(), Provider: "epay", Reference: "T-3", Note: "bell\a"},
	} {
		_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, r)
		is(t, fmt.Sprintf("%+v", r), err, domain.ErrInvalidInput)
	}
	_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, "NOPE", "T-3", ""))
	is(t, "unknown order", err, domain.ErrOrderNotFound)
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("bad input changed the order: %s", got.Status())
	}
}

// TestManualConfirmationReferenceIsUsedOnce: many operators confirm different orders with one
// reference at once; exactly one order is paid, the others are refused and unchanged.
func TestManualConfirmationReferenceIsUsedOnce(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 40)
	const n = 24
	orders := make([]domain.Order, n)
	for i := range orders {
		orders[i] = f.mustPlace(t, domain.BuyerID(fmt.Sprintf("buyer-%d", i)), p.ID(), 1)
	}
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		won, used, bad int
	)
	for _, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(boss, o.No(), "SAME-REF", "seen at the bank"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, domain.ErrReferenceUsed):
				used++
			default:
				bad++
				t.Errorf("confirm %s: %v", o.No(), err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || used != n-1 || bad != 0 {
		t.Fatalf("won %d, refused as used %d, other %d", won, used, bad)
	}
	paid := 0
	for _, o := range orders {
		if f.order(t, o.No()).Status() == domain.StatusPaid {
			paid++
		}
	}
	if paid != 1 || f.alertCount(domain.AlertManualPayment) != 1 {
		t.Fatalf("%d orders paid, %d alerts", paid, f.alertCount(domain.AlertManualPayment))
	}
	f.assertInvariants(t, p.ID())
}

// TestManualConfirmationOfAProviderReference: a reference a provider gave another order's
// payment is that order's, whoever types it.
func TestManualConfirmationOfAProviderReference(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 4)
	a := f.mustPlace(t, "alice", p.ID(), 1)
	b := f.mustPlace(t, "bob", p.ID(), 1)
	pay, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{OrderNo: a.No(), Buyer: "alice", Provider: "epay"})
	is(t, "create payment", err, nil)
	_, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(boss, b.No(), pay.ProviderRef, "looks right"))
	is(t, "another order's provider reference", err, domain.ErrReferenceUsed)
	if f.order(t, b.No()).Status() != domain.StatusPending {
		t.Fatal("the refused confirmation paid the order")
	}
}

// TestManualConfirmationLatePathWithoutStock: a CLOSED order confirmed after its stock went to
// another buyer takes the late path and ends UNFULFILLED, never oversold.
func TestManualConfirmationLatePathWithoutStock(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.clock.Advance(f.cfg.OrderTimeout)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
	rival := f.mustPlace(t, "bob", p.ID(), 2)
	f.mustPay(t, rival.No())
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	res, err := f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), "LATE-1", ""))
	is(t, "late confirmation", err, nil)
	if res.Order.Status() != domain.StatusUnfulfilled || !hasKind(f.alertsFor(o.No()), "paid_unfulfilled") ||
		!hasKind(f.alertsFor(o.No()), domain.AlertManualPayment) {
		t.Fatalf("late confirmation without stock: %s, alerts %v", res.Order.Status(), f.alertsFor(o.No()))
	}
	f.assertInvariants(t, p.ID())

	// With stock, a FAILED order is paid through the same late path.
	f.addCodes(t, p.ID(), 1)
	failed := f.mustPlace(t, "carol", p.ID(), 1)
	_, err = f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: failed.No(), Paid: false, Reason: "declined"})
	is(t, "fail", err, nil)
	gw.set(func(g *scriptedGateway) { g.state[failed.No()] = domain.OutcomePaid })
	res, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, failed.No(), "LATE-2", ""))
	is(t, "late confirmation with stock", err, nil)
	if res.Order.Status() != domain.StatusPaid || len(f.soldCards(t, failed.No())) != 1 {
		t.Fatalf("FAILED then confirmed: %s", res.Order.Status())
	}
	f.assertInvariants(t, p.ID())
}

// TestRefundPreviewAfterAManualConfirmation: the confirmed payment is the order's payment, so
// a refund asks its provider for the order's amount; unrevealed codes would be recycled,
// revealed ones voided.
func TestRefundPreviewAfterAManualConfirmation(t *testing.T) {
	gw := newScripted("epay")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	pay, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{OrderNo: o.No(), Buyer: "alice", Provider: "epay"})
	is(t, "create payment", err, nil)
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	_, err = f.shop.Payments.ConfirmPaymentManually(f.ctx, manual(clerk, o.No(), pay.ProviderRef, ""))
	is(t, "confirm", err, nil)
	pv, err := f.shop.Payments.PreviewRefund(f.ctx, o.No())
	is(t, "preview", err, nil)
	if !pv.Refundable || pv.Codes != 2 || pv.DefaultRecycled != 2 || pv.DefaultVoided != 0 ||
		pv.Provider != "epay" || pv.Amount != o.Amount() || pv.ByHand {
		t.Fatalf("preview %+v", pv)
	}
	if _, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), application.Reader{Identity: clerk}); err != nil {
		t.Fatal(err)
	}
	pv, _ = f.shop.Payments.PreviewRefund(f.ctx, o.No())
	if !pv.Revealed || pv.DefaultVoided != 2 || pv.DefaultRecycled != 0 {
		t.Fatalf("preview after a reveal %+v", pv)
	}
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	is(t, "refund", err, nil)
	if res.Voided != pv.DefaultVoided || res.Recycled != pv.DefaultRecycled || res.Money.Provider != "epay" {
		t.Fatalf("the refund did %+v, the preview said %+v", res, pv)
	}
}
