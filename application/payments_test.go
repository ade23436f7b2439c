package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// scriptedGateway is a payment provider whose answers a test sets: the use cases' rules are
// tested here; each real provider's wire format is tested against its simulator in its own
// package. A notification is JSON {order_no, ref, event, outcome, amount, currency} with the
// header X-Test-Sig: ok.
type scriptedGateway struct {
	name domain.Provider

	mu      sync.Mutex
	down    bool                                     // every call to the provider fails unreachable
	state   map[domain.OrderNo]domain.PaymentOutcome // what Query answers (default pending)
	noClose bool                                     // Close is unsupported
	noQuery bool                                     // Query is unsupported
	creates atomic.Int32
	closes  atomic.Int32
	refund  string         // how refunds answer: "" succeed, "refuse", "pending"
	payouts map[string]int // refund number → times money was returned (idempotent: at most 1)
	calls   atomic.Int32   // refund calls
	// checkThenPay makes refunds as epay's: no refund number (RefundIdempotent false); a refund
	// reads whether the order is refunded, waits gap, then pays out, so calls at once pay twice.
	checkThenPay bool
	gap          time.Duration
	refunded     map[domain.OrderNo]bool
}

func newScripted(name string) *scriptedGateway {
	return &scriptedGateway{name: domain.Provider(name), state: map[domain.OrderNo]domain.PaymentOutcome{},
		payouts: map[string]int{}, refunded: map[domain.OrderNo]bool{}}
}

func (g *scriptedGateway) set(fn func(g *scriptedGateway)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g)
}

func (g *scriptedGateway) Provider() domain.Provider     { return g.name }
func (g *scriptedGateway) Supports(domain.Currency) bool { return true }

func (g *scriptedGateway) Create(_ context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return domain.PaymentCreated{}, fmt.Errorf("create: %w", domain.ErrUnavailable)
	}
	g.creates.Add(1)
	return domain.PaymentCreated{ProviderRef: string(g.name) + "-" + string(r.OrderNo), PayURL: "https://pay.example/" + string(r.OrderNo)}, nil
}

type scriptedNotice struct {
	OrderNo  string `json:"order_no"`
	Ref      string `json:"ref"`
	Event    string `json:"event"`
	Outcome  string `json:"outcome"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	RefundNo string `json:"refund_no"`
	Refund   string `json:"refund"` // succeeded | refused | pending
}

func (g *scriptedGateway) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	if in.Header.Get("X-Test-Sig") != "ok" {
		return domain.ProviderNotice{}, fmt.Errorf("test signature: %w", domain.ErrBadSignature)
	}
	var n scriptedNotice
	if err := json.Unmarshal(in.Body, &n); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("body", "not JSON")
	}
	out := domain.ProviderNotice{OrderNo: domain.OrderNo(n.OrderNo), ProviderRef: n.Ref, EventID: n.Event, Amount: domain.Money(n.Amount)}
	if n.Currency != "" {
		c, err := domain.ParseCurrency(n.Currency)
		if err != nil {
			return domain.ProviderNotice{}, err
		}
		out.Currency = c
	}
	if n.RefundNo != "" {
		out.RefundNo = n.RefundNo
		out.RefundOutcome = map[string]domain.RefundOutcome{"succeeded": domain.RefundSucceeded,
			"refused": domain.RefundRefused, "pending": domain.RefundPending}[n.Refund]
	}
	out.Outcome = map[string]domain.PaymentOutcome{"paid": domain.OutcomePaid, "failed": domain.OutcomeFailed,
		"expired": domain.OutcomeExpired}[n.Outcome]
	if out.Outcome == 0 {
		out.Outcome = domain.OutcomePending
	}
	return out, nil
}

func (g *scriptedGateway) Query(_ context.Context, p domain.Payment) (domain.PaymentState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.noQuery:
		return domain.PaymentState{}, domain.ErrUnsupported
	case g.down:
		return domain.PaymentState{}, fmt.Errorf("query: %w", domain.ErrUnavailable)
	}
	o := g.state[p.OrderNo]
	if o == 0 {
		o = domain.OutcomePending
	}
	return domain.PaymentState{Outcome: o, ProviderRef: p.ProviderRef, Amount: p.Amount, Currency: p.Currency}, nil
}

func (g *scriptedGateway) Close(_ context.Context, p domain.Payment) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.noClose:
		return domain.ErrUnsupported
	case g.down:
		return fmt.Errorf("close: %w", domain.ErrUnavailable)
	case g.state[p.OrderNo] == domain.OutcomePaid:
		return domain.ErrAlreadyPaid
	}
	g.closes.Add(1)
	g.state[p.OrderNo] = domain.OutcomeExpired
	return nil
}

func (g *scriptedGateway) RefundIdempotent() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.checkThenPay
}

func (g *scriptedGateway) Refund(_ context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	g.mu.Lock()
	oneStep := !g.checkThenPay || g.down
	g.mu.Unlock()
	if !oneStep {
		return g.checkThenRefund(p, r)
	}
	g.calls.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return domain.RefundState{}, fmt.Errorf("refund: %w", domain.ErrUnavailable)
	}
	if r.RefundNo == "" || r.Amount != p.Amount {
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: "bad request"}, nil
	}
	switch g.refund {
	case "refuse":
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: "insufficient balance"}, nil
	case "pending":
		return domain.RefundState{Outcome: domain.RefundPending, ProviderRef: "rf-" + r.RefundNo}, nil
	}
	if g.payouts[r.RefundNo] == 0 { // idempotent by refund number, as providers are
		g.payouts[r.RefundNo]++
	}
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: "rf-" + r.RefundNo}, nil
}

// checkThenRefund is a refund without a refund number, whose check and payout are two steps.
func (g *scriptedGateway) checkThenRefund(p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	g.calls.Add(1)
	g.mu.Lock()
	done, gap := g.refunded[p.OrderNo], g.gap
	g.mu.Unlock()
	if done {
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: "rf-" + string(p.OrderNo)}, nil
	}
	time.Sleep(gap)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refunded[p.OrderNo] = true
	g.payouts[r.RefundNo]++
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: "rf-" + string(p.OrderNo)}, nil
}

// paidOut is how many times money was returned for the order, over all its refund numbers.
func (g *scriptedGateway) paidOut(no domain.OrderNo) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for refundNo, c := range g.payouts {
		if strings.HasPrefix(refundNo, string(no)+"R") {
			n += c
		}
	}
	return n
}

// notice is a signed notification of the scripted provider for o.
func notice(o domain.Order, outcome string, amount domain.Money, currency string) domain.InboundRequest {
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(o.No()), Ref: "ref-" + string(o.No()), Event: "evt-" + outcome,
		Outcome: outcome, Amount: int64(amount), Currency: currency})
	return domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}
}

func mustCreatePayment(t *testing.T, f *fixture, o domain.Order, provider string) domain.Payment {
	t.Helper()
	p, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: o.Buyer(), OrderNo: o.No(), Provider: domain.Provider(provider)})
	if err != nil {
		t.Fatalf("create payment at %s: %v", provider, err)
	}
	return p
}

func TestCreatePayment(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)

	gw.set(func(g *scriptedGateway) { g.down = true })
	_, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: o.No(), Provider: "acme"})
	is(t, "create while the provider is down", err, domain.ErrUnavailable)
	if ps, _ := f.shop.Payments.OrderPayments(f.ctx, o.No()); len(ps) != 0 {
		t.Fatalf("payments after a failed create: %+v", ps)
	}
	gw.set(func(g *scriptedGateway) { g.down = false })

	first, created, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: o.No(), Provider: "acme"})
	if err != nil || !created || first.Status != domain.PaymentOpen || first.Amount != o.Amount() ||
		first.Currency != f.cfg.Currency || first.PayURL == "" {
		t.Fatalf("create = %+v, created %v, %v", first, created, err)
	}
	again, created, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: o.No(), Provider: "acme"})
	if err != nil || created || again.ProviderRef != first.ProviderRef {
		t.Fatalf("create again = %+v, created %v, %v; want the same payment", again, created, err)
	}
	if n := gw.creates.Load(); n != 1 {
		t.Fatalf("the provider saw %d creates, want 1", n)
	}
	_, _, err = f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "mallory", OrderNo: o.No(), Provider: "acme"})
	is(t, "another buyer's order", err, domain.ErrOrderNotFound)
	_, _, err = f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: o.No(), Provider: "nope"})
	is(t, "an unknown provider", err, domain.ErrProviderUnknown)

	closed := f.mustPlace(t, "bob", p.ID(), 1)
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, closed.No()); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "bob", OrderNo: closed.No(), Provider: "acme"})
	is(t, "a CLOSED order", err, domain.ErrOrderNotPayable)
}

// Ten concurrent creates of one order's payment store one payment.
func TestConcurrentCreatesMakeOnePayment(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	var wg sync.WaitGroup
	refs := make([]string, 10)
	for i := range refs {
		wg.Go(func() {
			pay, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: o.No(), Provider: "acme"})
			if err != nil {
				t.Error(err)
			}
			refs[i] = pay.ProviderRef
		})
	}
	wg.Wait()
	ps, err := f.shop.Payments.OrderPayments(f.ctx, o.No())
	if err != nil || len(ps) != 1 {
		t.Fatalf("payments = %+v, %v; want one", ps, err)
	}
	for i, r := range refs {
		if r != ps[0].ProviderRef {
			t.Fatalf("create %d answered %q, want %q", i, r, ps[0].ProviderRef)
		}
	}
}

func TestNotificationPaysTheOrderOnce(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	mustCreatePayment(t, f, o, "acme")

	in := notice(o, "paid", o.Amount(), "CNY")
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if err := f.shop.Payments.HandleNotification(f.ctx, "acme", in, "203.0.113.9"); err != nil {
				t.Errorf("notification refused: %v", err)
			}
		})
	}
	wg.Wait()
	got := f.order(t, o.No())
	if got.Status() != domain.StatusPaid || got.PaymentRef() != "acme:acme-"+string(o.No()) {
		t.Fatalf("order %s ref %q, want PAID by acme", got.Status(), got.PaymentRef())
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowPay] != 1 {
		t.Fatalf("flow %v, want one pay row", ft)
	}
	if ps, _ := f.shop.Payments.OrderPayments(f.ctx, o.No()); len(ps) != 1 || ps[0].Status != domain.PaymentPaid {
		t.Fatalf("payment %+v, want PAID", ps)
	}
	// A stale "failed" after the success changes nothing.
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "failed", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("stale failure: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
		t.Fatalf("order %s after a stale failure, want PAID", got.Status())
	}
	recs, err := f.shop.Payments.Notifications(f.ctx, domain.NotificationQuery{OrderNo: o.No(), Limit: 100})
	if err != nil || len(recs) != 11 {
		t.Fatalf("notification log = %d records, %v; want 11", len(recs), err)
	}
	results := map[string]int{}
	for _, r := range recs {
		if !r.Verified || !r.Accepted || r.Provider != "acme" || r.Amount != o.Amount() {
			t.Fatalf("log record %+v", r)
		}
		results[r.Result]++
	}
	if results["paid"] != 1 || results["duplicate: order already PAID"] != 9 {
		t.Fatalf("log results %v, want one paid and nine duplicates", results)
	}
	f.assertInvariants(t, p.ID())
	if n := f.alertCount("second_payment"); n != 0 {
		t.Fatalf("duplicates raised %d second_payment alerts", n)
	}
}

// A success of one provider never pays an order whose payment is at another, nor an amount or
// currency other than the payment's; a forged notification changes nothing. Each is logged.
func TestNotificationsThatMustNotPay(t *testing.T) {
	acme, other := newScripted("acme"), newScripted("other")
	f := newFixture(t, withGateways(acme, other))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	mustCreatePayment(t, f, o, "acme")

	cases := []struct {
		name     string
		provider domain.Provider
		in       domain.InboundRequest
		want     error
		alert    string
	}{
		{"another provider's success", "other", notice(o, "paid", o.Amount(), "CNY"), domain.ErrPaymentNotFound, "foreign_payment"},
		{"underpaid", "acme", notice(o, "paid", o.Amount()-1, "CNY"), domain.ErrAmountMismatch, "amount_mismatch"},
		{"another currency", "acme", notice(o, "paid", o.Amount(), "USD"), domain.ErrAmountMismatch, "amount_mismatch"},
		{"forged", "acme", func() domain.InboundRequest {
			in := notice(o, "paid", o.Amount(), "CNY")
			in.Header = map[string][]string{"X-Test-Sig": {"forged"}}
			return in
		}(), domain.ErrBadSignature, ""},
	}
	for _, c := range cases {
		before := f.alertCount(c.alert)
		err := f.shop.Payments.HandleNotification(f.ctx, c.provider, c.in, "")
		is(t, c.name, err, c.want)
		if err == nil {
			t.Fatalf("%s accepted, want a refusal", c.name)
		}
		if c.alert != "" && f.alertCount(c.alert) != before+1 {
			t.Fatalf("%s raised no %s alert", c.name, c.alert)
		}
		if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
			t.Fatalf("%s: order %s, want PENDING", c.name, got.Status())
		}
	}
	recs, _ := f.shop.Payments.Notifications(f.ctx, domain.NotificationQuery{Limit: 100})
	if len(recs) != len(cases) {
		t.Fatalf("log has %d records, want %d", len(recs), len(cases))
	}
	for _, r := range recs {
		if r.Accepted || r.Result == "" {
			t.Fatalf("refused notification logged as %+v", r)
		}
	}
	f.assertInvariants(t, p.ID())
}

// An order that expires while its provider reports it paid is paid, never closed: the close
// asks the provider first.
func TestExpiryAsksTheProviderFirst(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	mustCreatePayment(t, f, o, "acme")
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
		t.Fatalf("order %s, want PAID (the provider said paid)", got.Status())
	}
	f.assertInvariants(t, p.ID())

	// Not paid: the payment is closed at the provider, then the order.
	o2 := f.mustPlace(t, "bob", p.ID(), 1)
	mustCreatePayment(t, f, o2, "acme")
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o2.No()); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o2.No()); got.Status() != domain.StatusClosed || gw.closes.Load() != 1 {
		t.Fatalf("order %s after %d closes, want CLOSED after one", got.Status(), gw.closes.Load())
	}
	if ps, _ := f.shop.Payments.OrderPayments(f.ctx, o2.No()); ps[0].Status != domain.PaymentExpired {
		t.Fatalf("payment %s, want EXPIRED", ps[0].Status)
	}
	f.assertInvariants(t, p.ID())
}

// A provider that cannot be reached keeps the close waiting (the consumer requeues, the sweeper
// skips the order), until it answers, or until the grace ends: then the order closes with an
// alert.
func TestCloseWaitsForAnUnreachableProvider(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	other := f.mustPlace(t, "bob", p.ID(), 1) // no payment: closes at once
	mustCreatePayment(t, f, o, "acme")
	gw.set(func(g *scriptedGateway) { g.down = true })
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	is(t, "close while the provider is down", f.shop.Sales.CloseExpired(f.ctx, o.No()), domain.ErrUnavailable)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatalf("sweep: %v (an order waiting for its provider must not stop the sweep)", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order %s while its provider is down, want PENDING", got.Status())
	}
	if got := f.order(t, other.No()); got.Status() != domain.StatusClosed {
		t.Fatalf("the other order %s, want CLOSED by the sweep", got.Status())
	}
	gw.set(func(g *scriptedGateway) { g.down = false })
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusClosed {
		t.Fatalf("order %s once the provider answers, want CLOSED", got.Status())
	}
	f.assertInvariants(t, p.ID())

	// Past the grace the order closes anyway, with an alert.
	o3 := f.mustPlace(t, "carol", p.ID(), 1)
	mustCreatePayment(t, f, o3, "acme")
	gw.set(func(g *scriptedGateway) { g.down = true })
	f.clock.Advance(f.cfg.OrderTimeout + f.cfg.PaymentCloseGrace + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o3.No()); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o3.No()); got.Status() != domain.StatusClosed || f.alertCount("payment_close_failed") != 1 {
		t.Fatalf("order %s, %d payment_close_failed alerts; want CLOSED with one", got.Status(), f.alertCount("payment_close_failed"))
	}
	f.assertInvariants(t, p.ID())
}

// A success for an order that is no longer PENDING is believed only when the provider confirms
// it (where the provider can be asked); then it takes the late-payment path.
func TestLateSuccessIsConfirmedWithTheProvider(t *testing.T) {
	gw := newScripted("acme")
	f := newFixture(t, withGateways(gw))
	p := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")
	gw.set(func(g *scriptedGateway) { g.noClose = true }) // the provider cannot close: the order closes regardless
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), "")
	if !errors.Is(err, domain.ErrInvalidInput) && err == nil {
		t.Fatal("a success the provider does not confirm was accepted")
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusClosed {
		t.Fatalf("order %s after an unconfirmed late success, want CLOSED", got.Status())
	}
	gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("a confirmed late success: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
		t.Fatalf("order %s after a confirmed late success, want PAID", got.Status())
	}
	f.assertInvariants(t, p.ID())
}

// An open payment is handed out again only while its order awaits payment: once the order
// closed (at a provider that cannot close its payment) or was paid through another provider,
// asking for it is refused, so that no buyer is sent to pay an order that moved on.
func TestNoPayLinkForAnOrderThatMovedOn(t *testing.T) {
	acme, other := newScripted("acme"), newScripted("other")
	acme.set(func(g *scriptedGateway) { g.noClose = true })
	f := newFixture(t, withGateways(acme, other))
	p := f.createProduct(t, 2, 5)

	closed := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, closed, "acme")
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, closed.No()); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, closed.No()); got.Status() != domain.StatusClosed {
		t.Fatalf("order %s, want CLOSED", got.Status())
	}
	if ps, _ := f.shop.Payments.OrderPayments(f.ctx, closed.No()); len(ps) != 1 || ps[0].Status != domain.PaymentOpen {
		t.Fatalf("payments %+v: want the one the provider could not close, OPEN", ps)
	}
	_, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "alice", OrderNo: closed.No(), Provider: "acme"})
	is(t, "the open payment of a CLOSED order", err, domain.ErrOrderNotPayable)

	paid := f.mustPlace(t, "bob", p.ID(), 1)
	mustCreatePayment(t, f, paid, "acme")
	mustCreatePayment(t, f, paid, "other")
	b, _ := json.Marshal(scriptedNotice{OrderNo: string(paid.No()), Ref: "other-" + string(paid.No()), Event: "evt-paid",
		Outcome: "paid", Amount: int64(paid.Amount()), Currency: "CNY"})
	if err := f.shop.Payments.HandleNotification(f.ctx, "other", domain.InboundRequest{Method: "POST",
		Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: b}, ""); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "bob", OrderNo: paid.No(), Provider: "acme"})
	is(t, "the open payment of an order paid elsewhere", err, domain.ErrOrderNotPayable)
	got, created, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "bob", OrderNo: paid.No(), Provider: "other"})
	if err != nil || created || got.Status != domain.PaymentPaid {
		t.Fatalf("the paid payment asked again = %+v, created %v, %v; want it, PAID", got, created, err)
	}
	f.assertInvariants(t, p.ID())
}

// Once one provider paid the order, its payment still open at another provider is closed there,
// so the buyer cannot pay twice.
func TestPaymentAtOneProviderClosesTheOthers(t *testing.T) {
	acme, other := newScripted("acme"), newScripted("other")
	f := newFixture(t, withGateways(acme, other))
	p := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")
	mustCreatePayment(t, f, o, "other")
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatal(err)
	}
	if other.closes.Load() != 1 {
		t.Fatalf("the other provider saw %d closes, want 1", other.closes.Load())
	}
	ps, _ := f.shop.Payments.OrderPayments(f.ctx, o.No())
	got := map[domain.Provider]domain.PaymentStatus{}
	for _, pay := range ps {
		got[pay.Provider] = pay.Status
	}
	if got["acme"] != domain.PaymentPaid || got["other"] != domain.PaymentExpired {
		t.Fatalf("payments %v, want acme PAID and other EXPIRED", got)
	}
	f.assertInvariants(t, p.ID())
}
