package application_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// TestDashboardAfterASmallSale runs a small sale through the use cases and reads the dashboard:
// stock and paid from the gate and ledger, orders per interval from the ledger, sold-out
// answers from this instance's counters, the payment success rate, and the overdue orders.
func TestDashboardAfterASmallSale(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 1, 3)
	frozen := f.createProduct(t, 1, 1)
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, frozen.ID(), "test"); err != nil {
		t.Fatal(err)
	}
	upcoming, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "later", Price: testPrice, MaxPerOrder: 1,
		Sale: domain.SaleRules{StartsAt: t0.Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	ended, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "over", Price: testPrice, MaxPerOrder: 1,
		Sale: domain.SaleRules{StartsAt: t0.Add(-2 * time.Hour), EndsAt: t0.Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}

	var placed []domain.Order
	for i := range 5 {
		res, err := f.place(domain.BuyerID("buyer-"+string(rune('a'+i))), p.ID(), 1, f.newKey())
		switch {
		case i < 3 && err == nil:
			placed = append(placed, res.Order)
		case i >= 3 && errors.Is(err, domain.ErrSoldOut):
		default:
			t.Fatalf("order %d: %v", i, err)
		}
	}
	f.clock.Advance(application.RateStep)
	if _, err := f.place("buyer-f", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("order after the sale: %v, want sold out", err)
	}
	for _, o := range placed[:2] {
		if _, err := f.pay(t, o.No()); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(application.RateStep)

	d, err := f.shop.Catalogue.Dashboard(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.ProductID
	for _, pd := range d.Products {
		got = append(got, pd.Product.ID())
	}
	if want := []domain.ProductID{p.ID(), upcoming.ID()}; !slices.Equal(got, want) {
		t.Fatalf("products = %v, want %v (frozen %d and ended %d left out)", got, want, frozen.ID(), ended.ID())
	}
	if !d.Products[1].Upcoming || d.Products[0].Upcoming {
		t.Errorf("upcoming = %v, %v; want false, true", d.Products[0].Upcoming, d.Products[1].Upcoming)
	}
	pd := d.Products[0]
	if !pd.GateOK || pd.Gate.Stock != 0 || pd.Gate.Sold != 3 || pd.Pending != 1 || pd.Paid != 2 {
		t.Errorf("gate %+v (ok %v), pending %d, paid %d; want stock 0, held 3, pending 1, paid 2", pd.Gate, pd.GateOK, pd.Pending, pd.Paid)
	}
	if rate, ok := pd.PaymentSuccess(); !ok || rate != 1 {
		t.Errorf("payment success = %v (%v), want 1: two paid, the PENDING one not decided", rate, ok)
	}
	if _, ok := d.Products[1].PaymentSuccess(); ok {
		t.Error("payment success of a product without orders is decided, want not")
	}

	// The window ends with the last complete interval: t0's (3 orders, 2 sold out) and the next
	// (1 sold out); the running one is left out.
	n := application.RateIntervals
	if pd.Orders.Counts[n-2] != 3 || pd.Orders.Counts[n-1] != 0 || sum(pd.Orders.Counts) != 3 {
		t.Errorf("orders per interval end in %v, want 3 then 0", pd.Orders.Counts[n-3:])
	}
	if pd.SoldOut.Counts[n-2] != 2 || pd.SoldOut.Counts[n-1] != 1 || sum(pd.SoldOut.Counts) != 3 {
		t.Errorf("sold-out answers per interval end in %v, want 2 then 1", pd.SoldOut.Counts[n-3:])
	}
	if !pd.Orders.From.Equal(t0.Add(-time.Duration(n-2) * application.RateStep)) {
		t.Errorf("series from %v, want %v", pd.Orders.From, t0.Add(-time.Duration(n-2)*application.RateStep))
	}
	if r := pd.SoldOut.PerSecond()[n-2]; r != 2/application.RateStep.Seconds() {
		t.Errorf("sold-out rate = %v/s, want %v", r, 2/application.RateStep.Seconds())
	}
	if d.Overdue != 0 {
		t.Errorf("overdue = %d before any expiry, want 0", d.Overdue)
	}

	// The unpaid order expires: overdue until it is closed, then it counts against the rate.
	f.clock.Advance(f.cfg.OrderTimeout)
	if d, err = f.shop.Catalogue.Dashboard(f.ctx); err != nil || d.Overdue != 1 || d.OverdueMore {
		t.Fatalf("overdue = %d (more %v), %v; want 1", d.Overdue, d.OverdueMore, err)
	}
	if err := f.shop.Sales.CloseExpired(f.ctx, placed[2].No()); err != nil {
		t.Fatal(err)
	}
	if d, err = f.shop.Catalogue.Dashboard(f.ctx); err != nil {
		t.Fatal(err)
	}
	if rate, ok := d.Products[0].PaymentSuccess(); !ok || rate != 2.0/3 || d.Overdue != 0 {
		t.Errorf("payment success = %v (%v), overdue %d; want 2/3, 0", rate, ok, d.Overdue)
	}
	if d.Products[0].SoldOut.Counts[n-1] != 0 || sum(d.Products[0].SoldOut.Counts) != 0 {
		t.Errorf("sold-out answers 15 minutes later = %v, want none in the window", d.Products[0].SoldOut.Counts)
	}
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
