package application_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// applyFaultGate fails Apply while down is set, as a gate whose Redis cannot be reached.
type applyFaultGate struct {
	domain.StockGate
	down atomic.Bool
}

func (g *applyFaultGate) Apply(ctx context.Context, c domain.GateChange) (bool, error) {
	if g.down.Load() {
		return false, domain.ErrUnavailable
	}
	return g.StockGate.Apply(ctx, c)
}

// closeWhileGateDown places an order of 3, lets it expire and closes it while the gate cannot
// apply the restore: the gate change is left in the outbox, waiting for its retry time.
func closeWhileGateDown(t *testing.T) (*fixture, *memory.Gate, *applyFaultGate, domain.ProductID) {
	t.Helper()
	var mg *memory.Gate
	fg := &applyFaultGate{}
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { mg, fg.StockGate = m, m; return fg }))
	p := f.createProduct(t, 5, 10)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	fg.down.Store(true)
	f.clock.Advance(f.shop.Config().OrderTimeout + time.Second)
	_ = f.shop.Sales.CloseExpired(f.ctx, o.No()) // the ledger closes it; the gate's restore fails
	if got := f.order(t, o.No()).Status(); got != domain.StatusClosed {
		t.Fatalf("order %s after its close, want CLOSED", got)
	}
	if n, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil || n != 0 {
		t.Fatalf("relay while the gate is down sent %d (%v)", n, err)
	}
	return f, mg, fg, p.ID()
}

// A repair drains the gate changes that wait for a retry before it rebuilds: otherwise the
// restore, already counted in the ledger's numbers the rebuild copies, would be applied once
// more after it (stock 13 of 10 codes: orders the pool cannot fill).
func TestRepairAppliesGateChangesWaitingForRetryFirst(t *testing.T) {
	f, mg, fg, pid := closeWhileGateDown(t)
	fg.down.Store(false)
	mg.Flush() // Redis restarted empty: the counters and the Ref markers are gone
	rep, err := f.shop.Catalogue.Reconcile(f.ctx, pid, true)
	if err != nil || !rep.OK() {
		t.Fatalf("repair: %v, %d differences", err, rep.Differences)
	}
	f.clock.Advance(time.Minute) // past any retry time
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatal(err)
	}
	if lv := f.levels(t, pid); lv.Stock != 10 || lv.Sold != 0 {
		t.Fatalf("gate %+v after repair and relay, want stock 10 sold 0", lv)
	}
	f.assertInvariants(t, pid)
}

// A repair whose drain cannot apply a gate change refuses to rebuild and says the gate is
// unavailable; the change is applied once the gate is back.
func TestRepairRefusesWhileGateChangesFail(t *testing.T) {
	f, _, fg, pid := closeWhileGateDown(t)
	before := f.levels(t, pid)
	if _, err := f.shop.Catalogue.Reconcile(f.ctx, pid, true); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("repair with the gate down: %v, want ErrUnavailable", err)
	}
	if lv := f.levels(t, pid); lv != before {
		t.Fatalf("gate %+v after a refused repair, want it untouched (%+v)", lv, before)
	}
	fg.down.Store(false)
	f.clock.Advance(time.Minute)
	f.assertInvariants(t, pid)
	if lv := f.levels(t, pid); lv.Stock != 10 || lv.Sold != 0 {
		t.Fatalf("gate %+v once back, want stock 10 sold 0", lv)
	}
}

// A change committed while the gate has lost the product, and applied (as a no-op) right after
// its commit, is not counted again by a relay that comes after the rebuild: the rebuild copied
// the ledger, which counts it already. This is the window a repair's drain cannot cover: the
// change commits after the drain, before the rebuild reads the ledger.
func TestChangeAppliedWhileGateMissingIsNotCountedAfterRebuild(t *testing.T) {
	var mg *memory.Gate
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { mg = m; return m }))
	p := f.createProduct(t, 5, 10)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil { // the import's change is sent: only the close's will be pending
		t.Fatal(err)
	}
	mg.Flush() // Redis restarted empty
	f.clock.Advance(f.shop.Config().OrderTimeout + time.Second)
	_ = f.shop.Sales.CloseExpired(f.ctx, o.No()) // committed; its immediate apply finds no product
	if err := f.shop.Catalogue.RebuildGate(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 10 || lv.Sold != 0 {
		t.Fatalf("rebuilt gate %+v, want stock 10 sold 0", lv)
	}
	f.clock.Advance(time.Minute)
	f.assertInvariants(t, p.ID()) // relays the close's gate change: it must change nothing
	if lv := f.levels(t, p.ID()); lv.Stock != 10 || lv.Sold != 0 {
		t.Fatalf("gate %+v after the relay, want stock 10 sold 0", lv)
	}
}
