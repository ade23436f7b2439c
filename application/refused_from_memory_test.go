package application_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// leaseGate is a gate whose lease covers every reservation it is asked about (when on), and
// records what it was asked.
type leaseGate struct {
	domain.StockGate
	mu    sync.Mutex
	on    bool
	asked []domain.Reservation
}

func (g *leaseGate) SoldOutByLease(r domain.Reservation) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, r)
	return g.on
}

// RefusedFromMemory refuses only what PlaceOrder would refuse the same way, and only from the
// product cache and the gate's lease: a product it has not read, an invalid request and an
// order with a coupon are left to PlaceOrder; its sold-out answers count as PlaceOrder's.
func TestRefusedFromMemory(t *testing.T) {
	lease := &leaseGate{}
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate { lease.StockGate = g; return lease }))
	p := f.createProduct(t, 5, 3)
	later, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "later", Price: testPrice, MaxPerOrder: 5,
		Sale: domain.SaleRules{StartsAt: t0.Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := application.PlaceOrder{Buyer: "alice", Product: p.ID(), Qty: 1, IdempotencyKey: "alice-key-0001"}
	lease.on = true
	if err := f.shop.Sales.RefusedFromMemory(cmd); err != nil {
		t.Fatalf("a product not in the cache refused from memory: %v", err)
	}
	if _, err := f.place("alice", p.ID(), 1, "alice-key-0000"); err != nil { // reads p into the cache
		t.Fatal(err)
	}
	if err := f.shop.Sales.RefusedFromMemory(cmd); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("under the lease: %v, want sold out", err)
	}
	if got := lease.asked[len(lease.asked)-1]; got.Product != p.ID() || got.Buyer != "alice" || got.Key != "alice-key-0001" || got.Qty != 1 {
		t.Fatalf("the gate was asked about %+v", got)
	}
	asked := len(lease.asked)
	for _, c := range []application.PlaceOrder{
		{Buyer: "alice", Product: p.ID(), Qty: 6, IdempotencyKey: "alice-key-0002"},                   // qty over the limit
		{Buyer: "alice", Product: p.ID(), Qty: 1, IdempotencyKey: "x"},                                // invalid key
		{Buyer: "a:b", Product: p.ID(), Qty: 1, IdempotencyKey: "alice-key-0003"},                     // invalid buyer
		{Buyer: "alice", Product: 0, Qty: 1, IdempotencyKey: "alice-key-0004"},                        // no product
		{Buyer: "alice", Product: p.ID(), Qty: 1, IdempotencyKey: "alice-key-0005", Coupon: "SAVE10"}, // a coupon's checks come first
	} {
		if err := f.shop.Sales.RefusedFromMemory(c); err != nil {
			t.Errorf("%+v refused from memory: %v", c, err)
		}
	}
	if len(lease.asked) != asked {
		t.Fatalf("the lease was asked about %d requests PlaceOrder refuses before the gate", len(lease.asked)-asked)
	}
	lease.on = false
	if err := f.shop.Sales.RefusedFromMemory(cmd); err != nil {
		t.Fatalf("without a lease: %v", err)
	}

	// Clearly before the start: the refusal PlaceOrder gives, coupon or not, once cached.
	early := application.PlaceOrder{Buyer: "bob", Product: later.ID(), Qty: 1, IdempotencyKey: "bob-key-0000"}
	_, want := f.shop.Sales.PlaceOrder(f.ctx, early)
	var nse *domain.SaleNotStartedError
	if !errors.As(want, &nse) {
		t.Fatalf("PlaceOrder before the start: %v", want)
	}
	early.Coupon = "SAVE10"
	if err := f.shop.Sales.RefusedFromMemory(early); err == nil || err.Error() != want.Error() {
		t.Fatalf("before the start: %v, want %v", err, want)
	}

	f.clock.Advance(application.RateStep)
	var n int64
	for _, c := range f.shop.Sales.SoldOutAnswers(p.ID()).Counts {
		n += c
	}
	if n != 1 {
		t.Fatalf("%d sold-out answers counted, want 1", n)
	}
}
