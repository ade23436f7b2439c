package application_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// createRuled creates a product with sale rules and codes fresh codes.
func (f *fixture) createRuled(t *testing.T, rules domain.SaleRules, refundFrees bool, codes int) domain.Product {
	t.Helper()
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "flash sale", Price: testPrice, MaxPerOrder: 10,
		Sale: rules, RefundReleasesLimit: refundFrees})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	f.addCodes(t, p.ID(), codes)
	return p
}

// reserveCounter counts reservations that reach the gate.
type reserveCounter struct {
	*memory.Gate
	mu       sync.Mutex
	reserves int
}

func (g *reserveCounter) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	g.mu.Lock()
	g.reserves++
	g.mu.Unlock()
	return g.Gate.Reserve(ctx, r)
}

func (g *reserveCounter) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reserves
}

func TestSaleWindowAtItsEdges(t *testing.T) {
	var gate *reserveCounter
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate { gate = &reserveCounter{Gate: g}; return gate }),
		withConfig(func(c *application.Config) { c.SaleStartMargin = 2 * time.Second }))
	starts := t0.Add(time.Minute)
	p := f.createRuled(t, domain.SaleRules{StartsAt: starts, EndsAt: starts.Add(time.Minute)}, false, 10)

	// Far before the start: refused here, the gate is not asked.
	_, err := f.place("alice", p.ID(), 1, f.newKey())
	var early *domain.SaleNotStartedError
	if !errors.As(err, &early) || !errors.Is(err, domain.ErrSaleNotStarted) || early.StartsIn != time.Minute {
		t.Fatalf("a minute before the start: %v, want SaleNotStartedError starting in 1m", err)
	}
	if gate.count() != 0 {
		t.Fatalf("the gate was asked %d times before the margin", gate.count())
	}
	// Within the margin the gate decides, to the millisecond.
	f.clock.Set(starts.Add(-time.Millisecond))
	_, err = f.place("alice", p.ID(), 1, f.newKey())
	if !errors.As(err, &early) || early.StartsIn != time.Millisecond {
		t.Fatalf("1 ms before the start: %v, want the gate's NotStarted with 1ms", err)
	}
	if gate.count() != 1 {
		t.Fatalf("the gate was asked %d times, want 1", gate.count())
	}
	f.clock.Set(starts)
	f.mustPlace(t, "alice", p.ID(), 1)
	f.clock.Set(starts.Add(time.Minute - time.Millisecond))
	f.mustPlace(t, "bob", p.ID(), 1)
	f.clock.Set(starts.Add(time.Minute))
	_, err = f.place("carol", p.ID(), 1, f.newKey())
	is(t, "order at the end", err, domain.ErrSaleEnded)
	if l := f.levels(t, p.ID()); l.Stock != 8 || l.Sold != 2 {
		t.Fatalf("levels %+v, want 8 left and 2 sold: refusals change nothing", l)
	}
}

// An instance whose clock is behind the gate's still sells at the gate's start, and one whose
// clock is ahead does not sell early: the gate's clock decides within the margin.
func TestSaleStartIsTheGatesClock(t *testing.T) {
	gateClock := memory.NewFakeClock(t0)
	starts := t0.Add(10 * time.Second)
	for _, skew := range []time.Duration{-1500 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(fmt.Sprintf("instance clock %s", skew), func(t *testing.T) {
			gateClock.Set(t0)
			instance := memory.NewFakeClock(t0.Add(skew))
			f := newFixture(t, withClock(instance), withConfig(func(c *application.Config) { c.SaleStartMargin = 2 * time.Second }),
				withGate(func(*memory.Gate) domain.StockGate { return memory.NewGate(gateClock) }))
			p := f.createRuled(t, domain.SaleRules{StartsAt: starts}, false, 5)
			gateClock.Set(starts.Add(-time.Millisecond))
			instance.Set(starts.Add(-time.Millisecond + skew))
			if _, err := f.place("alice", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrSaleNotStarted) {
				t.Fatalf("1 ms before the gate's start: %v, want ErrSaleNotStarted", err)
			}
			gateClock.Set(starts)
			instance.Set(starts.Add(skew))
			if _, err := f.place("alice", p.ID(), 1, f.newKey()); err != nil {
				t.Fatalf("at the gate's start: %v", err)
			}
		})
	}
}

func TestBuyerLimitLifeCycle(t *testing.T) {
	for _, refundFrees := range []bool{false, true} {
		t.Run(fmt.Sprintf("refund releases %v", refundFrees), func(t *testing.T) {
			f := newFixture(t)
			p := f.createRuled(t, domain.SaleRules{BuyerLimit: 2}, refundFrees, 20)
			first := f.mustPlace(t, "alice", p.ID(), 2)
			_, err := f.place("alice", p.ID(), 1, f.newKey())
			is(t, "a third unit", err, domain.ErrBuyerHoldingLimit)
			f.mustPlace(t, "bob", p.ID(), 2)

			// The unpaid order closes: alice may buy again.
			f.clock.Advance(f.cfg.OrderTimeout + time.Second)
			if err := f.shop.Sales.CloseExpired(f.ctx, first.No()); err != nil {
				t.Fatal(err)
			}
			paid := f.mustPlace(t, "alice", p.ID(), 2)
			f.mustPay(t, paid.No())
			_, err = f.place("alice", p.ID(), 1, f.newKey())
			is(t, "over the limit with a PAID order", err, domain.ErrBuyerHoldingLimit)

			if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: paid.No()}); err != nil {
				t.Fatal(err)
			}
			_, err = f.place("alice", p.ID(), 1, f.newKey())
			if refundFrees && err != nil {
				t.Fatalf("after a refund that releases the limit: %v", err)
			}
			if !refundFrees {
				is(t, "after a refund that keeps counting", err, domain.ErrBuyerHoldingLimit)
			}
			f.assertInvariants(t, p.ID())
		})
	}
}

// Switching a limit on for a product on sale counts the orders placed before it, and a gate
// that lost everything (Redis restarted empty) gets the rules and the counts back.
func TestBuyerLimitSetOnSaleAndAfterGateLoss(t *testing.T) {
	f := newFixture(t)
	p := f.createRuled(t, domain.SaleRules{}, false, 20)
	f.mustPlace(t, "alice", p.ID(), 3)
	limit := 4
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{BuyerLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	_, err := f.place("alice", p.ID(), 2, f.newKey())
	is(t, "3 held before the limit + 2", err, domain.ErrBuyerHoldingLimit)
	f.mustPlace(t, "alice", p.ID(), 1)

	f.gate.Flush()
	if _, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true); err != nil {
		t.Fatal(err)
	}
	_, err = f.place("alice", p.ID(), 1, f.newKey())
	is(t, "after the gate was rebuilt", err, domain.ErrBuyerHoldingLimit)
	f.mustPlace(t, "bob", p.ID(), 4)

	// Windows are rebuilt too.
	ends := f.shopNow()
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{EndsAt: &ends}); err != nil {
		t.Fatal(err)
	}
	f.gate.Flush()
	if _, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true); err != nil {
		t.Fatal(err)
	}
	_, err = f.place("carol", p.ID(), 1, f.newKey())
	is(t, "after the end, rebuilt", err, domain.ErrSaleEnded)
	f.assertInvariants(t, p.ID())
}

// Many buyers, each with many concurrent requests and repeated keys: no buyer ever holds more
// than the limit in PENDING and PAID orders, and every invariant holds at quiescence.
func TestBuyerLimitUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	const limit, buyers, perBuyer = 2, 12, 16
	p := f.createRuled(t, domain.SaleRules{BuyerLimit: limit}, false, 200)
	var wg sync.WaitGroup
	for b := range buyers {
		buyer := domain.BuyerID(fmt.Sprintf("buyer-%02d", b))
		for i := range perBuyer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("key-%08d", b*100+i%5) // repeated keys: double clicks and retries
				res, err := f.place(buyer, p.ID(), 1+i%2, key)
				switch {
				case err == nil && !res.Replayed && i%3 == 0:
					f.pay(t, res.Order.No()) //nolint:errcheck // a lost race is fine; invariants judge
				case err == nil, errors.Is(err, domain.ErrBuyerHoldingLimit), errors.Is(err, domain.ErrIdempotencyMismatch),
					errors.Is(err, domain.ErrRequestInProgress):
				default:
					t.Errorf("place: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	held, err := f.ledger.Orders().HeldByBuyer(f.ctx, p.ID(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != buyers {
		t.Fatalf("%d buyers hold units, want all %d", len(held), buyers)
	}
	for b, n := range held {
		if n > limit {
			t.Errorf("%s holds %d units, limit %d", b, n, limit)
		}
	}
	f.assertInvariants(t, p.ID())
}

// Changing whether refunds release the limit rebuilds the counts: refunded orders stop (or
// start) counting at once, and reconciliation agrees.
func TestRefundSettingChangeRecountsHoldings(t *testing.T) {
	f := newFixture(t)
	p := f.createRuled(t, domain.SaleRules{BuyerLimit: 2}, false, 20)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.place("alice", p.ID(), 1, f.newKey())
	is(t, "a refunded order still counting", err, domain.ErrBuyerHoldingLimit)
	releases := true
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{RefundReleasesLimit: &releases}); err != nil {
		t.Fatal(err)
	}
	f.mustPlace(t, "alice", p.ID(), 2)
	rep, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), false)
	if err != nil || !rep.OK() {
		t.Fatalf("reconcile after the change: %+v, %v", rep.Checks, err)
	}
	f.assertInvariants(t, p.ID())
}

// After the claim of a key's order expired, a request with the same key and another body may
// hold a fresh claim for a moment (its order then fails as a duplicate). A re-send of the
// original request in that moment is answered with its order, not refused as another request:
// the ledger has the last word. Found by the concurrent history test.
func TestReplayWhileAnotherBodyHoldsTheExpiredKey(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 10)
	key := f.newKey()
	first, err := f.place("alice", p.ID(), 1, key)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(f.cfg.IdempotencyTTL + time.Second)
	// The other body's reservation, caught between the gate and its failed insert.
	other := domain.Reservation{Product: p.ID(), Buyer: "alice", Key: domain.IdempotencyKey(key), Qty: 2,
		OrderNo: "2503011200000000000000000001", Fingerprint: domain.RequestFingerprint(p.ID(), 2), KeyTTL: time.Minute}
	if res, err := f.gate.Reserve(f.ctx, other); err != nil || res.Outcome != domain.Reserved {
		t.Fatalf("the other body's reservation: %+v, %v", res, err)
	}
	again, err := f.place("alice", p.ID(), 1, key)
	if err != nil || !again.Replayed || again.Order.No() != first.Order.No() {
		t.Fatalf("re-send of the original request: %+v, %v; want its order %s replayed", again, err, first.Order.No())
	}
	_, err = f.place("alice", p.ID(), 3, key)
	is(t, "a third body", err, domain.ErrIdempotencyMismatch)
}

// alertMessages returns the messages of the order's alerts of kind.
func (f *fixture) alertMessages(no domain.OrderNo, kind string) []string {
	var out []string
	for _, a := range f.alerts.Alerts() {
		if a.OrderNo == no && a.Kind == kind {
			out = append(out, a.Message)
		}
	}
	return out
}

// wantRefusedLate checks that a late payment was accepted but refused by the sale rules: the
// order UNFULFILLED with the payment on record, no codes, one paid_unfulfilled alert naming why.
func (f *fixture) wantRefusedLate(t *testing.T, got domain.Order, reason string) {
	t.Helper()
	if got.Status() != domain.StatusUnfulfilled || got.Reason() != reason || got.PaidAt().IsZero() {
		t.Fatalf("late payment of %s: %s (%q, paid at %v), want UNFULFILLED %q with the payment recorded",
			got.No(), got.Status(), got.Reason(), got.PaidAt(), reason)
	}
	if cards := f.soldCards(t, got.No()); len(cards) != 0 {
		t.Fatalf("%s refused by the sale rules holds %d codes", got.No(), len(cards))
	}
	msgs := f.alertMessages(got.No(), "paid_unfulfilled")
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], reason+": refund") {
		t.Fatalf("alerts of %s: %q, want one paid_unfulfilled saying %q and asking for a refund", got.No(), msgs, reason)
	}
}

// A buyer with a limit of 2 who lets three orders of 2 expire with their pay pages open, then
// pays all three, gets 2 codes: the late re-reservation counts what the buyer holds now. The
// other payments are accepted, UNFULFILLED with an alert; fulfilling one is refused while the
// buyer holds the limit, and allowed once a refund that releases it lowers the holding.
func TestLatePaymentsCannotPassTheBuyerLimit(t *testing.T) {
	f := newFixture(t)
	p := f.createRuled(t, domain.SaleRules{BuyerLimit: 2}, true, 20)
	var orders []domain.Order
	for range 3 {
		o := f.mustPlace(t, "alice", p.ID(), 2)
		f.clock.Advance(f.cfg.OrderTimeout)
		is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
		orders = append(orders, o)
	}
	codes := 0
	for i, o := range orders {
		got, err := f.payByCallback(t, o.No())
		is(t, "late payment", err, nil)
		codes += len(f.soldCards(t, o.No()))
		if i == 0 {
			if got.Status() != domain.StatusPaid {
				t.Fatalf("the first late payment: %s, want PAID", got.Status())
			}
			continue
		}
		f.wantRefusedLate(t, got, "late payment: over the buyer's limit")
	}
	if codes != 2 {
		t.Fatalf("alice got %d codes with a limit of 2", codes)
	}
	if held, err := f.gate.HeldCounts(f.ctx, p.ID()); err != nil || held["alice"] != 2 {
		t.Fatalf("alice's holding count at the gate: %v, %v; want 2", held, err)
	}
	if l := f.levels(t, p.ID()); l.Stock != 18 || l.Sold != 2 {
		t.Fatalf("gate after the refused late payments: %+v, want 18/2", l)
	}
	f.assertInvariants(t, p.ID())

	_, err := f.shop.Sales.FulfilOrder(f.ctx, orders[1].No())
	is(t, "fulfil while alice holds the limit", err, domain.ErrFulfilOverLimit)
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: orders[0].No()}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.shop.Sales.FulfilOrder(f.ctx, orders[1].No()); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("fulfil after the refund released the limit: %v, %v", got.Status(), err)
	}
	_, err = f.shop.Sales.FulfilOrder(f.ctx, orders[2].No())
	is(t, "fulfil the third", err, domain.ErrFulfilOverLimit)
	f.assertInvariants(t, p.ID())
}

// An order placed inside the sale window and paid after its end gets no codes: the payment is
// accepted, UNFULFILLED with an alert, and an operator's fulfil is refused even with stock.
// One paid late before the end that found no stock can still be fulfilled after it: the end
// is judged at the instant the payment was accepted.
func TestLatePaymentAfterTheSaleEnded(t *testing.T) {
	f := newFixture(t)
	ends := t0.Add(f.cfg.OrderTimeout + time.Minute)
	p := f.createRuled(t, domain.SaleRules{EndsAt: ends}, false, 3)
	afterEnd := f.mustPlace(t, "alice", p.ID(), 1)
	inTime := f.mustPlace(t, "bob", p.ID(), 2)
	f.clock.Advance(f.cfg.OrderTimeout)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, afterEnd.No()), nil)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, inTime.No()), nil)
	f.mustPay(t, f.mustPlace(t, "carol", p.ID(), 2).No())
	got, err := f.payByCallback(t, inTime.No())
	is(t, "late payment without stock before the end", err, nil)
	if got.Status() != domain.StatusUnfulfilled || got.Reason() != "late payment: no stock left" {
		t.Fatalf("late payment without stock: %s %q", got.Status(), got.Reason())
	}

	f.clock.Set(ends)
	got, err = f.payByCallback(t, afterEnd.No())
	is(t, "late payment at the end", err, nil)
	f.wantRefusedLate(t, got, "late payment: after the sale ended")
	if l := f.levels(t, p.ID()); l.Stock != 1 || l.Sold != 2 {
		t.Fatalf("gate after the refused late payment: %+v, want 1/2 (the unit left is not taken)", l)
	}
	f.assertInvariants(t, p.ID())

	f.addCodesHeld(t, p.ID(), 2)
	_, err = f.shop.Sales.FulfilOrder(f.ctx, afterEnd.No())
	is(t, "fulfil an order paid after the end", err, domain.ErrPaidAfterSaleEnded)
	if got, err := f.shop.Sales.FulfilOrder(f.ctx, inTime.No()); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("fulfil after the end of an order paid before it: %v, %v", got.Status(), err)
	}
	if cards := f.soldCards(t, inTime.No()); len(cards) != 2 {
		t.Fatalf("the order paid in time holds %d codes, want 2", len(cards))
	}
	f.assertInvariants(t, p.ID())
}
