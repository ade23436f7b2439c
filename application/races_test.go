package application_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// Concurrent late payments of one order: 40 expired orders of 2, each then paid by 16
// identical signed callbacks at once (a provider resending while the first is in flight). Only
// the attempt that took the late reservation may give it back, so every order ends PAID once,
// the gate equals the ledger, and selling out afterwards fulfils every paid order.
func TestConcurrentLatePaymentsOfOneOrder(t *testing.T) {
	// A late reservation answers after a millisecond, as a gate across the network does: the
	// resends' reservations then overlap the first payment's transaction.
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate {
		return &hookGate{Gate: g, afterReserve: func(r domain.Reservation) {
			if r.Key == "" {
				time.Sleep(time.Millisecond)
			}
		}}
	}))
	const orders, qty, resends = 40, 2, 16
	p := f.createProduct(t, qty, 100)
	placed := make([]domain.Order, orders)
	for i := range placed {
		placed[i] = f.mustPlace(t, domain.BuyerID(fmt.Sprintf("late-%02d", i)), p.ID(), qty)
	}
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if _, err := f.shop.Sales.Sweep(f.ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	for _, o := range placed {
		if got := f.order(t, o.No()); got.Status() != domain.StatusClosed {
			t.Fatalf("order %s is %s after its timeout, want CLOSED", o.No(), got.Status())
		}
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	var unavailable atomic.Int32
	for _, o := range placed {
		cb := f.callbackFor(t, o, "paid", o.Amount())
		for range resends {
			wg.Go(func() {
				<-start
				got, err := f.shop.Payments.HandlePaymentCallback(f.ctx, cb)
				switch {
				case errors.Is(err, domain.ErrUnavailable):
					unavailable.Add(1) // waited for the holder too long: the provider retries
				case err != nil:
					t.Errorf("callback for %s: %v", o.No(), err)
				case got.Status() != domain.StatusPaid:
					t.Errorf("callback for %s answered %s, want PAID", o.No(), got.Status())
				}
			})
		}
	}
	close(start)
	wg.Wait()
	t.Logf("%d of %d callbacks answered unavailable", unavailable.Load(), orders*resends)
	for _, o := range placed {
		if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
			t.Fatalf("order %s is %s, want PAID", o.No(), got.Status())
		}
		if ft := f.flowTypes(t, o.No()); ft[domain.FlowPay] != 1 || ft[domain.FlowLateReserve] != 1 {
			t.Fatalf("order %s flow %v, want one late-reserve and one pay row", o.No(), ft)
		}
	}
	f.assertInvariants(t, p.ID())

	// Sell out what is left: every new order is paid and fulfilled, nothing freezes.
	lv := f.levels(t, p.ID())
	if lv.Stock != 100-orders*qty {
		t.Fatalf("gate stock %d after the late payments, want %d", lv.Stock, 100-orders*qty)
	}
	for i := range lv.Stock {
		o := f.mustPlace(t, domain.BuyerID(fmt.Sprintf("after-%02d", i)), p.ID(), 1)
		if got := f.mustPay(t, o.No()); got.Status() != domain.StatusPaid {
			t.Fatalf("order %s after the late payments: %s", o.No(), got.Status())
		}
	}
	if _, err := f.place("one-too-many", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("an order past the pool: %v, want sold out", err)
	}
	if n := f.alertCount("paid_unfulfilled") + f.alertCount("stock_inconsistency"); n != 0 {
		t.Fatalf("%d unfulfilled or inconsistency alerts, want none", n)
	}
	f.assertInvariants(t, p.ID())
}

// Two operators press fulfil on one UNFULFILLED order at once: one fulfils it, the others are
// told it is no longer UNFULFILLED, and the units are taken once.
func TestConcurrentFulfilOfOneOrder(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	other := f.mustPlace(t, "bob", p.ID(), 2) // takes the stock back
	if got, err := f.pay(t, o.No()); err != nil || got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment without stock = %s, %v; want UNFULFILLED", got.Status(), err)
	}
	f.mustPay(t, other.No())
	f.addCodesHeld(t, p.ID(), 2)

	const operators = 8
	var wg sync.WaitGroup
	var fulfilled, refused atomic.Int32
	start := make(chan struct{})
	for range operators {
		wg.Go(func() {
			<-start
			got, err := f.shop.Sales.FulfilOrder(f.ctx, o.No())
			switch {
			case err == nil && got.Status() == domain.StatusPaid:
				fulfilled.Add(1)
			case errors.Is(err, domain.ErrInvalidTransition), errors.Is(err, domain.ErrUnavailable):
				refused.Add(1)
			default:
				t.Errorf("fulfil: %s, %v", got.Status(), err)
			}
		})
	}
	close(start)
	wg.Wait()
	if fulfilled.Load() != 1 {
		t.Fatalf("%d fulfils succeeded, want exactly 1", fulfilled.Load())
	}
	f.assertInvariants(t, p.ID())
	if lv := f.levels(t, p.ID()); lv.Stock != 0 || lv.Sold != 4 {
		t.Fatalf("gate %+v, want stock 0, sold 4", lv)
	}
}

// Fulfilling an UNFULFILLED order of a frozen product answers product_frozen, not sold out.
func TestFulfilOfFrozenProduct(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 1, 1)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, p.ID(), "audit"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.pay(t, o.No()); err != nil || got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment of a frozen product = %s, %v; want UNFULFILLED", got.Status(), err)
	}
	_, err := f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil of a frozen product", err, domain.ErrProductFrozen)
	f.assertInvariants(t, p.ID())
}

// A payment for an order already handled without a payment reference, now arriving with one,
// is a second payment: the operator is alerted.
func TestSecondPaymentAfterOneWithoutReference(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 1, 2)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	first := paidNotice(o)
	first.PaymentRef = ""
	if got, err := f.shop.Payments.ApplyPayment(f.ctx, first); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("first payment = %s, %v", got.Status(), err)
	}
	again := first
	if _, err := f.shop.Payments.ApplyPayment(f.ctx, again); err != nil {
		t.Fatal(err)
	}
	if n := f.alertCount("second_payment"); n != 0 {
		t.Fatalf("a resend without a reference raised %d second_payment alerts", n)
	}
	second := first
	second.PaymentRef = "pay-2"
	if _, err := f.shop.Payments.ApplyPayment(f.ctx, second); err != nil {
		t.Fatal(err)
	}
	if n := f.alertCount("second_payment"); n != 1 {
		t.Fatalf("second_payment alerts = %d, want 1", n)
	}
}

// A repair lands between an order's reservation at the gate and its write to the ledger: the
// rebuild counts the in-flight reservation, so once the order is written the gate still equals
// the ledger (an unfenced rebuild would give the units back and sell them twice).
func TestRepairBetweenReservationAndOrder(t *testing.T) {
	var repairOnce atomic.Bool
	var f *fixture
	f = newFixture(t, withGate(func(g *memory.Gate) domain.StockGate {
		return &hookGate{Gate: g, afterReserve: func(r domain.Reservation) {
			if repairOnce.CompareAndSwap(false, true) {
				if _, err := f.shop.Catalogue.Reconcile(f.ctx, r.Product, true); err != nil {
					t.Errorf("repair: %v", err)
				}
			}
		}}
	}))
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	if !repairOnce.Load() {
		t.Fatal("the repair did not run")
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 2 || lv.Sold != 3 {
		t.Fatalf("gate %+v after a repair during the order, want stock 2, sold 3", lv)
	}
	f.assertInvariants(t, p.ID())
	for i := range 2 {
		f.mustPlace(t, domain.BuyerID(fmt.Sprintf("b%d", i)), p.ID(), 1)
	}
	if _, err := f.place("late", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("order past the pool after the repair: %v, want sold out", err)
	}
	f.mustPay(t, o.No())
	f.assertInvariants(t, p.ID())
}

// An operator's freeze that lands while a repair runs is not undone by the repair.
func TestRepairKeepsAFreezeThatLandsDuringIt(t *testing.T) {
	var f *fixture
	var armed, froze atomic.Bool
	f = newFixture(t, withGate(func(g *memory.Gate) domain.StockGate {
		return &hookGate{Gate: g, beforeFinish: func(p domain.ProductID) {
			if armed.Load() && froze.CompareAndSwap(false, true) {
				if err := f.shop.Catalogue.FreezeProduct(f.ctx, p, "operator"); err != nil {
					t.Errorf("freeze: %v", err)
				}
			}
		}}
	}))
	p := f.createProduct(t, 1, 5)
	armed.Store(true)
	if _, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if !froze.Load() {
		t.Fatal("the freeze did not run")
	}
	if lv := f.levels(t, p.ID()); !lv.Frozen {
		t.Fatalf("gate %+v after a freeze during the repair, want frozen", lv)
	}
	if _, err := f.place("alice", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrProductFrozen) {
		t.Fatalf("order after the freeze: %v, want product frozen", err)
	}
}

// Orders, payments, closes, refunds and repairs hammer one product at once; at quiescence the
// gate equals the ledger and every invariant holds.
func TestRepairsDuringASale(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 60)
	const workers, steps = 8, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 10))
			var mine []domain.Order
			for i := range steps {
				switch op := rng.IntN(10); {
				case op < 4:
					pl, err := f.place(domain.BuyerID(fmt.Sprintf("w%d-%d", w, i)), p.ID(), 1+rng.IntN(2), f.newKey())
					if err == nil {
						mine = append(mine, pl.Order)
					}
				case op < 6 && len(mine) > 0:
					_, _ = f.shop.Payments.ApplyPayment(f.ctx, paidNotice(mine[rng.IntN(len(mine))]))
				case op < 7 && len(mine) > 0:
					o := mine[rng.IntN(len(mine))]
					_, _ = f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: false, Reason: "declined"})
				case op < 8 && len(mine) > 0:
					_, _ = f.shop.Payments.RefundOrder(f.ctx, refundOf(mine[rng.IntN(len(mine))].No(), rng.IntN(2) == 0))
				default:
					if _, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true); err != nil && !errors.Is(err, domain.ErrUnavailable) {
						t.Errorf("repair: %v", err)
					}
				}
			}
		})
	}
	// One relay, as one instance runs it (relays side by side deliver events at least once).
	done := make(chan struct{})
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		for {
			select {
			case <-done:
				return
			default:
				_, _ = f.shop.Relay.RelayOutbox(f.ctx)
			}
		}
	}()
	wg.Wait()
	close(done)
	<-relayed
	f.assertInvariants(t, p.ID())
}

// refundOf is an operator's refund of the order, voiding the codes or not.
func refundOf(no domain.OrderNo, void bool) application.Refund {
	return application.Refund{OrderNo: no, Void: void}
}

// hookGate is a memory gate that runs a hook after each Reserve and before each FinishRebuild,
// to land another use case at exactly that point.
type hookGate struct {
	*memory.Gate
	afterReserve func(domain.Reservation)
	beforeFinish func(domain.ProductID)
}

func (g *hookGate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	res, err := g.Gate.Reserve(ctx, r)
	if err == nil && res.Outcome == domain.Reserved && g.afterReserve != nil {
		g.afterReserve(r)
	}
	return res, err
}

func (g *hookGate) FinishRebuild(ctx context.Context, p domain.ProductID, plan domain.RebuildPlan) error {
	if g.beforeFinish != nil {
		g.beforeFinish(p)
	}
	return g.Gate.FinishRebuild(ctx, p, plan)
}

// A late payment attempt that died after its reservation (or whose COMMIT reply was lost and
// the commit did not happen) leaves the order's late claim held: a resend waits briefly, then
// answers unavailable (the provider retries); the orphan sweep returns the units once they are
// OrphanAfter old, and the next resend pays the order.
func TestOrphanSweepReturnsADeadLatePayment(t *testing.T) {
	f := newFixture(t, withConfig(func(c *application.Config) { c.ReplayWait = 50 * time.Millisecond }))
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	dead := domain.Reservation{Product: p.ID(), Buyer: o.Buyer(), Qty: 2, OrderNo: o.No(), KeyTTL: 24 * time.Hour,
		Ref: fmt.Sprintf("%s:%d", o.No(), int(domain.FlowLateReserve)), Fingerprint: "late:dead-attempt"}
	if res, err := f.gate.Reserve(f.ctx, dead); err != nil || res.Outcome != domain.Reserved {
		t.Fatalf("the dead attempt's reservation = %+v, %v", res, err)
	}
	_, err := f.payByCallback(t, o.No())
	is(t, "a payment while another attempt holds the late claim", err, domain.ErrUnavailable)
	if got := f.order(t, o.No()); got.Status() != domain.StatusClosed {
		t.Fatalf("order %s, want still CLOSED", got.Status())
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 2 || lv.Sold != 2 {
		t.Fatalf("gate %+v while the dead attempt holds 2, want stock 2, sold 2", lv)
	}
	if n, err := f.shop.Sales.SweepOrphans(f.ctx); err != nil || n != 0 {
		t.Fatalf("a sweep before OrphanAfter released %d, %v; want 0", n, err)
	}
	f.clock.Advance(f.cfg.OrphanAfter + time.Second)
	if n, err := f.shop.Sales.SweepOrphans(f.ctx); err != nil || n != 1 {
		t.Fatalf("SweepOrphans = %d, %v; want the dead late reservation released", n, err)
	}
	if f.alertCount("orphan_reservation_released") != 1 {
		t.Fatal("no alert for the released late reservation")
	}
	f.assertInvariants(t, p.ID())
	if got, err := f.payByCallback(t, o.No()); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("the resend after the sweep = %s, %v; want PAID", got.Status(), err)
	}
	f.assertInvariants(t, p.ID())
	// The paid order's late hold is no orphan: a later sweep leaves its units with the order.
	f.clock.Advance(f.cfg.OrphanAfter + time.Second)
	if n, err := f.shop.Sales.SweepOrphans(f.ctx); err != nil || n != 0 {
		t.Fatalf("a sweep after the payment released %d, %v; want 0", n, err)
	}
	f.assertInvariants(t, p.ID())
}
