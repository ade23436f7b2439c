package application_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// crashedReservation reserves qty units for the buyer's key straight at the gate, as PlaceOrder
// does, and writes nothing to the ledger: the service was killed between the two.
func (f *fixture) crashedReservation(t *testing.T, buyer domain.BuyerID, pid domain.ProductID, qty int, key string) domain.Reservation {
	t.Helper()
	now := f.shopNow()
	r := domain.Reservation{Product: pid, Buyer: buyer, Key: domain.IdempotencyKey(key), Qty: qty,
		OrderNo: domain.NewOrderNo(now, buyer, rand.Uint64()), Fingerprint: domain.RequestFingerprint(pid, qty),
		KeyTTL: f.cfg.IdempotencyTTL, BuyerCap: f.cfg.BuyerCap, BuyerWindow: f.cfg.BuyerWindow}
	res, err := f.gate.Reserve(f.ctx, r)
	if err != nil || res.Outcome != domain.Reserved {
		t.Fatalf("reserve at the gate: %+v, %v", res, err)
	}
	return r
}

func (f *fixture) holds(t *testing.T, pid domain.ProductID) []domain.Hold {
	t.Helper()
	hs, err := f.gate.Holds(f.ctx, pid, 0, 1000)
	if err != nil {
		t.Fatalf("holds: %v", err)
	}
	return hs
}

func (f *fixture) sweep(t *testing.T) int {
	t.Helper()
	n, err := f.shop.Sales.Sweep(f.ctx)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return n
}

// A reservation whose order was never written (the service was killed between the gate and
// the ledger) is released by the sweeper once it is OrphanAfter old: its units go back, the
// buyer's key works again, an operator is told, and every invariant holds.
func TestSweeperReleasesOrphanReservation(t *testing.T) {
	f := newFixture(t, withConfig(func(c *application.Config) { c.ReplayWait = 20 * time.Millisecond }))
	p := f.createProduct(t, 5, 10)
	key := f.newKey()
	orphan := f.crashedReservation(t, "alice", p.ID(), 3, key)
	if lv := f.levels(t, p.ID()); lv.Stock != 7 || lv.Sold != 3 {
		t.Fatalf("gate after the crash %+v, want 7/3", lv)
	}
	// Meanwhile the buyer's retry waits on an order that never comes.
	_, err := f.place("alice", p.ID(), 3, key)
	is(t, "retry while the orphan holds the key", err, domain.ErrRequestInProgress)

	f.clock.Advance(f.cfg.OrphanAfter - time.Second)
	if n := f.sweep(t); n != 0 {
		t.Fatalf("sweep before OrphanAfter released %d", n)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 7 || lv.Sold != 3 || f.alertCount("orphan_reservation_released") != 0 {
		t.Fatalf("gate %+v, %d alerts before OrphanAfter: want the reservation kept", lv, f.alertCount("orphan_reservation_released"))
	}

	f.clock.Advance(time.Second) // exactly OrphanAfter old
	if n := f.sweep(t); n != 1 {
		t.Fatalf("sweep at OrphanAfter released %d, want 1", n)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 10 || lv.Sold != 0 {
		t.Fatalf("gate after the release %+v, want 10/0", lv)
	}
	if kinds := f.alertsFor(orphan.OrderNo); len(kinds) != 1 || kinds[0] != "orphan_reservation_released" {
		t.Fatalf("alerts for the orphan: %v, want one orphan_reservation_released", kinds)
	}
	if hs := f.holds(t, p.ID()); len(hs) != 0 {
		t.Fatalf("holds after the release: %+v", hs)
	}
	if n := f.sweep(t); n != 0 {
		t.Fatalf("second sweep released %d more", n)
	}

	// The key is usable again: the retry places a real order.
	res, err := f.place("alice", p.ID(), 3, key)
	is(t, "retry after the release", err, nil)
	if res.Replayed || res.Order.No() == orphan.OrderNo {
		t.Fatalf("retry after the release answered %s (replayed %v), want a new order", res.Order.No(), res.Replayed)
	}
	f.mustPay(t, res.Order.No())
	f.assertInvariants(t, p.ID())
}

// Orders that were written keep their reservations: the sweeper forgets their holds (their
// units follow the order's life cycle) and releases nothing.
func TestSweeperForgetsHoldsOfWrittenOrders(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 10)
	pending := f.mustPlace(t, "alice", p.ID(), 2)
	paid := f.mustPlace(t, "bob", p.ID(), 3)
	f.mustPay(t, paid.No())
	if hs := f.holds(t, p.ID()); len(hs) != 2 {
		t.Fatalf("holds before the sweep: %+v, want the two orders'", hs)
	}

	f.clock.Advance(f.cfg.OrphanAfter)
	if n := f.sweep(t); n != 0 {
		t.Fatalf("sweep released %d reservations of written orders", n)
	}
	if hs := f.holds(t, p.ID()); len(hs) != 0 {
		t.Fatalf("holds after the sweep: %+v, want none (forgotten)", hs)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 5 || lv.Sold != 5 || f.alertCount("orphan_reservation_released") != 0 {
		t.Fatalf("gate %+v with %d orphan alerts, want 5/5 and none", lv, f.alertCount("orphan_reservation_released"))
	}
	f.mustPay(t, pending.No()) // the forgotten order still pays from its own reservation
	f.assertInvariants(t, p.ID())

	// An order closed by timeout later returns its units through the outbox as always.
	late := f.mustPlace(t, "carol", p.ID(), 4)
	f.clock.Advance(f.cfg.OrderTimeout)
	f.sweep(t)
	if o := f.order(t, late.No()); o.Status() != domain.StatusClosed {
		t.Fatalf("late order %s, want CLOSED", o.Status())
	}
	f.assertInvariants(t, p.ID())
}

// The sweep reads holds in batches of SweepBatch and asks the ledger once per batch.
func TestSweepOrphansWorksInBatches(t *testing.T) {
	var l *existingCounter
	f := newFixture(t, withConfig(func(c *application.Config) { c.SweepBatch = 2 }),
		withLedger(func(m *memory.Ledger) domain.Ledger { l = &existingCounter{Ledger: m}; return l }))
	p := f.createProduct(t, 5, 20)
	var orphans []domain.Reservation
	for i := range 8 {
		if i%3 == 0 {
			f.mustPlace(t, "bob", p.ID(), 1)
			f.clock.Advance(time.Millisecond)
			continue
		}
		orphans = append(orphans, f.crashedReservation(t, "mallory", p.ID(), 2, f.newKey()))
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Advance(f.cfg.OrphanAfter)
	n, err := f.shop.Sales.SweepOrphans(f.ctx)
	is(t, "sweep orphans", err, nil)
	if n != len(orphans) {
		t.Fatalf("released %d, want %d", n, len(orphans))
	}
	if calls, most := l.calls.Load(), l.most.Load(); calls != 4 || most != 2 {
		t.Fatalf("Existing called %d times with up to %d numbers; want 4 calls of at most 2 (8 holds, batches of 2)", calls, most)
	}
	if f.alertCount("orphan_reservation_released") != len(orphans) {
		t.Fatalf("%d orphan alerts, want %d", f.alertCount("orphan_reservation_released"), len(orphans))
	}
	f.assertInvariants(t, p.ID())
}

// A very slow request's own compensation (Cancel) racing the sweeper's release of the same
// reservation: the units come back exactly once.
func TestOrphanReleaseRacesLateCancel(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 10)
	for range 25 {
		r := f.crashedReservation(t, "alice", p.ID(), 4, f.newKey())
		f.clock.Advance(f.cfg.OrphanAfter)
		var cancelled atomic.Bool
		var released atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			ok, err := f.gate.Cancel(context.Background(), r)
			if err != nil {
				t.Error(err)
			}
			cancelled.Store(ok)
		})
		wg.Go(func() {
			<-start
			n, err := f.shop.Sales.SweepOrphans(context.Background())
			if err != nil {
				t.Error(err)
			}
			released.Store(int64(n))
		})
		close(start)
		wg.Wait()
		returned := released.Load()
		if cancelled.Load() {
			returned++
		}
		if returned != 1 {
			t.Fatalf("cancel %v and sweep released %d: the units came back %d times, want once",
				cancelled.Load(), released.Load(), returned)
		}
		if lv := f.levels(t, p.ID()); lv.Stock != 10 || lv.Sold != 0 {
			t.Fatalf("gate %+v, want 10/0", lv)
		}
	}
	f.assertInvariants(t, p.ID())
}

// The budget: one buyer may hold BuyerCap units of a product per window; others are not
// affected, replays are free, and the window's end resets it.
func TestBuyerCapLimitsOneBuyer(t *testing.T) {
	f := newFixture(t, withConfig(func(c *application.Config) { c.BuyerCap = 5 }))
	if f.shop.Config().BuyerWindow != f.cfg.OrderTimeout {
		t.Fatalf("default buyer window %v, want the order timeout %v", f.shop.Config().BuyerWindow, f.cfg.OrderTimeout)
	}
	p := f.createProduct(t, 5, 30)
	firstKey := f.newKey()
	first, err := f.place("alice", p.ID(), 3, firstKey)
	is(t, "first order", err, nil)
	f.mustPlace(t, "alice", p.ID(), 2)
	before := f.levels(t, p.ID())
	_, err = f.place("alice", p.ID(), 1, f.newKey())
	is(t, "order over the cap", err, domain.ErrBuyerLimit)
	if lv := f.levels(t, p.ID()); lv != before {
		t.Fatalf("a refused order moved the gate: %+v -> %+v", before, lv)
	}
	again, err := f.place("alice", p.ID(), 3, firstKey)
	is(t, "replay with the budget spent", err, nil)
	if !again.Replayed || again.Order.No() != first.Order.No() {
		t.Fatalf("replay answered %s (replayed %v), want the original", again.Order.No(), again.Replayed)
	}
	f.mustPlace(t, "bob", p.ID(), 5) // another buyer is not affected
	f.mustPay(t, first.Order.No())   // paying does not refund the window either
	_, err = f.place("alice", p.ID(), 1, f.newKey())
	is(t, "order over the cap after paying", err, domain.ErrBuyerLimit)

	f.clock.Advance(f.shop.Config().BuyerWindow)
	f.sweep(t) // closes the unpaid orders, forgets the holds
	f.mustPlace(t, "alice", p.ID(), 5)
	f.assertInvariants(t, p.ID())
}

func TestBuyerCapZeroIsNoLimit(t *testing.T) {
	f := newFixture(t)
	if f.cfg.BuyerCap != 0 {
		t.Fatalf("DefaultConfig's BuyerCap = %d, want 0 (off)", f.cfg.BuyerCap)
	}
	p := f.createProduct(t, 5, 30)
	for range 6 {
		f.mustPlace(t, "alice", p.ID(), 5)
	}
	f.assertInvariants(t, p.ID())
}

func TestConfigDefaultsAndRefusals(t *testing.T) {
	f := newFixture(t, withConfig(func(c *application.Config) { c.OrphanAfter, c.BuyerWindow = 0, 0 }))
	if got := f.shop.Config(); got.OrphanAfter != application.DefaultOrphanAfter || got.BuyerWindow != got.OrderTimeout {
		t.Fatalf("zero OrphanAfter and BuyerWindow became %v and %v, want %v and the order timeout",
			got.OrphanAfter, got.BuyerWindow, application.DefaultOrphanAfter)
	}
	if application.DefaultConfig().OrphanAfter != 2*time.Minute {
		t.Fatalf("default OrphanAfter %v, want 2m", application.DefaultConfig().OrphanAfter)
	}
	for name, spoil := range map[string]func(*application.Config){
		"negative buyer cap":    func(c *application.Config) { c.BuyerCap = -1 },
		"negative buyer window": func(c *application.Config) { c.BuyerWindow = -time.Second },
		"negative orphan age":   func(c *application.Config) { c.OrphanAfter = -time.Second },
	} {
		cfg := application.DefaultConfig()
		spoil(&cfg)
		if _, err := application.New(cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue,
			Publisher: f.pub, Verifier: f.signer, Alerter: f.alerts, Clock: f.clock}); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// existingCounter is a memory ledger that counts OrderRepo.Existing calls and their size.
type existingCounter struct {
	*memory.Ledger
	calls, most atomic.Int64
}

func (l *existingCounter) Orders() domain.OrderRepo { return countingOrders{l.Ledger.Orders(), l} }

type countingOrders struct {
	domain.OrderRepo
	l *existingCounter
}

func (o countingOrders) Existing(ctx context.Context, nos []domain.OrderNo) (map[domain.OrderNo]bool, error) {
	o.l.calls.Add(1)
	for {
		most := o.l.most.Load()
		if int64(len(nos)) <= most || o.l.most.CompareAndSwap(most, int64(len(nos))) {
			break
		}
	}
	return o.OrderRepo.Existing(ctx, nos)
}
