package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// confirmingGateway is a scripted provider whose notifications must be confirmed by its query
// (a domain.NoticeConfirmer, as epay is): its record is the scripted state.
type confirmingGateway struct {
	*scriptedGateway
	confirms  int
	otherRefs bool // its record holds another reference than the notice's
}

var _ domain.NoticeConfirmer = (*confirmingGateway)(nil)

func (g *confirmingGateway) ConfirmPaid(ctx context.Context, p domain.Payment, n domain.ProviderNotice) (domain.PaymentState, error) {
	g.mu.Lock()
	g.confirms++
	other := g.otherRefs
	g.mu.Unlock()
	st, err := g.Query(ctx, p)
	if err != nil {
		return domain.PaymentState{}, err
	}
	if other || st.ProviderRef != n.ProviderRef {
		return domain.PaymentState{}, errors.New("the record's reference is not the notice's")
	}
	return st, nil
}

func newConfirming(name string) *confirmingGateway {
	g := &confirmingGateway{scriptedGateway: newScripted(name)}
	g.noClose = true // like epay: no close API
	return g
}

// paidNotice is the provider's signed success for o, under the reference its payment was
// created with.
func signedSuccess(o domain.Order, provider string) domain.InboundRequest {
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(o.No()), Ref: provider + "-" + string(o.No()), Event: "evt-paid",
		Outcome: "paid", Amount: int64(o.Amount()), Currency: "CNY"})
	return domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}
}

// lastResult is what the notification log says of the order's newest notification.
func lastResult(t *testing.T, f *fixture, no domain.OrderNo) string {
	t.Helper()
	recs, err := f.shop.Payments.Notifications(f.ctx, domain.NotificationQuery{OrderNo: no, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("notifications of %s: %v %v", no, recs, err)
	}
	return recs[0].Result
}

// A provider that must confirm its notifications pays a PENDING order only when its record
// says paid with the notice's reference; a validly signed success it does not confirm leaves
// the order PENDING.
func TestConfirmedSuccessPaysOnlyWhatTheProviderSays(t *testing.T) {
	gw := newConfirming("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	mustCreatePayment(t, f, o, "acme")

	// Signed, but the provider has the payment unpaid (a forged or replayed notice).
	err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(o, "acme"), "")
	if err == nil || errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("an unconfirmed success: %v, want a refusal", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order %s after an unconfirmed success, want PENDING", got.Status())
	}
	if r := lastResult(t, f, o.No()); !strings.HasPrefix(r, "refused") {
		t.Fatalf("logged %q", r)
	}
	// Paid there, but under another reference than the notice's.
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	gw.otherRefs = true
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(o, "acme"), ""); err == nil {
		t.Fatal("a success the provider's record does not match was accepted")
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order %s after a mismatched success, want PENDING", got.Status())
	}
	gw.otherRefs = false
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(o, "acme"), ""); err != nil {
		t.Fatalf("a confirmed success: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid || gw.confirms != 3 {
		t.Fatalf("order %s after %d confirmations, want PAID after 3", got.Status(), gw.confirms)
	}
	f.assertInvariants(t, p.ID())
}

// A provider that cannot be asked: the success is refused as unavailable (the provider
// resends), nothing is paid; once it answers, the resend pays.
func TestConfirmationUnreachableRefusesTheSuccess(t *testing.T) {
	gw := newConfirming("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid; g.down = true })
	err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(o, "acme"), "")
	is(t, "a success while the provider cannot be asked", err, domain.ErrUnavailable)
	if err == nil {
		t.Fatal("accepted, want the provider's refusal")
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order %s, want PENDING", got.Status())
	}
	if r := lastResult(t, f, o.No()); !strings.HasPrefix(r, "not applied yet") {
		t.Fatalf("logged %q", r)
	}
	gw.set(func(g *scriptedGateway) { g.down = false })
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(o, "acme"), ""); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
		t.Fatalf("order %s after the resend, want PAID", got.Status())
	}
	f.assertInvariants(t, p.ID())
}

// Paid, then refunded at the provider, the notification lost: at the order's expiry the query
// says refunded, and the order closes (never paid) with payment_refunded_at_provider; a late
// success for it is refused with the alert again. Frozen: the order closes with
// payment_frozen_at_provider, its payment left open.
func TestRefundedOrFrozenAtTheProviderNeverPays(t *testing.T) {
	for _, confirming := range []bool{false, true} {
		var gw domain.PaymentGateway
		sg := newScripted("acme")
		sg.noClose = true
		gw = sg
		if confirming {
			cg := newConfirming("acme")
			sg, gw = cg.scriptedGateway, cg
		}
		f := newFixture(t, withGateways(gw))
		p := f.createProduct(t, 2, 5)
		refunded := f.mustPlace(t, "alice", p.ID(), 1)
		frozen := f.mustPlace(t, "bob", p.ID(), 1)
		mustCreatePayment(t, f, refunded, "acme")
		mustCreatePayment(t, f, frozen, "acme")
		sg.set(func(g *scriptedGateway) {
			g.state[refunded.No()] = domain.OutcomeRefunded
			g.state[frozen.No()] = domain.OutcomeFrozen
		})
		f.clock.Advance(f.cfg.OrderTimeout + time.Second)
		for _, no := range []domain.OrderNo{refunded.No(), frozen.No()} {
			if err := f.shop.Sales.CloseExpired(f.ctx, no); err != nil {
				t.Fatal(err)
			}
			if got := f.order(t, no); got.Status() != domain.StatusClosed {
				t.Fatalf("confirming %v: order %s, want CLOSED", confirming, got.Status())
			}
		}
		if f.alertCount("payment_refunded_at_provider") != 1 || f.alertCount("payment_frozen_at_provider") != 1 {
			t.Fatalf("confirming %v: alerts %+v", confirming, f.alerts.Alerts())
		}
		if ps, _ := f.shop.Payments.OrderPayments(f.ctx, refunded.No()); len(ps) != 1 || ps[0].Status != domain.PaymentRefunded {
			t.Fatalf("payments of the refunded %+v, want one REFUNDED", ps)
		}
		if ps, _ := f.shop.Payments.OrderPayments(f.ctx, frozen.No()); len(ps) != 1 || ps[0].Status != domain.PaymentOpen {
			t.Fatalf("payments of the frozen %+v, want one OPEN", ps)
		}
		f.assertInvariants(t, p.ID())
		if !confirming {
			continue
		}
		// A late success of the refunded payment: refused, alerted again.
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(refunded, "acme"), ""); err == nil {
			t.Fatal("a success of a payment refunded at the provider was accepted")
		}
		if got := f.order(t, refunded.No()); got.Status() != domain.StatusClosed || f.alertCount("payment_refunded_at_provider") != 2 {
			t.Fatalf("order %s, %d alerts", got.Status(), f.alertCount("payment_refunded_at_provider"))
		}
		// The frozen one released and notified: the confirmed late path pays it.
		sg.set(func(g *scriptedGateway) { g.state[frozen.No()] = domain.OutcomePaid })
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", signedSuccess(frozen, "acme"), ""); err != nil {
			t.Fatal(err)
		}
		if got := f.order(t, frozen.No()); got.Status() != domain.StatusPaid {
			t.Fatalf("the released order %s, want PAID late", got.Status())
		}
		f.assertInvariants(t, p.ID())
	}
}
