package domain_test

import (
	"errors"
	"reflect"
	"testing"

	"cardshop/domain"
)

func tieredProduct(t *testing.T, tiers ...domain.PriceTier) domain.Product {
	t.Helper()
	p, err := domain.NewProduct(1, "tiered", 1000, 100, t0)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Revision()
	r.Tiers = tiers
	p, err = p.Revise(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckTiers: min_qty at least 2, strictly increasing, within max_per_order; unit prices
// positive and never above the price before (base price, then the previous tier).
func TestCheckTiers(t *testing.T) {
	tier := func(q int, p domain.Money) domain.PriceTier { return domain.PriceTier{MinQty: q, UnitPrice: p} }
	many := make([]domain.PriceTier, domain.MaxPriceTiers+1)
	for i := range many {
		many[i] = tier(i+2, domain.Money(900-i))
	}
	for _, tt := range []struct {
		name  string
		tiers []domain.PriceTier
		ok    bool
	}{
		{"none", nil, true},
		{"one", []domain.PriceTier{tier(10, 900)}, true},
		{"decreasing", []domain.PriceTier{tier(2, 950), tier(10, 900), tier(100, 800)}, true},
		{"equal to the base price", []domain.PriceTier{tier(5, 1000)}, true},
		{"equal to the previous tier", []domain.PriceTier{tier(5, 900), tier(10, 900)}, true},
		{"the per-order limit itself", []domain.PriceTier{tier(100, 500)}, true},
		{"min_qty 1", []domain.PriceTier{tier(1, 900)}, false},
		{"min_qty 0", []domain.PriceTier{tier(0, 900)}, false},
		{"min_qty negative", []domain.PriceTier{tier(-3, 900)}, false},
		{"repeated min_qty", []domain.PriceTier{tier(5, 900), tier(5, 800)}, false},
		{"decreasing min_qty", []domain.PriceTier{tier(10, 900), tier(5, 800)}, false},
		{"above the per-order limit", []domain.PriceTier{tier(101, 900)}, false},
		{"zero price", []domain.PriceTier{tier(5, 0)}, false},
		{"negative price", []domain.PriceTier{tier(5, -1)}, false},
		{"above the base price", []domain.PriceTier{tier(5, 1001)}, false},
		{"above the previous tier", []domain.PriceTier{tier(5, 900), tier(10, 901)}, false},
		{"too many", many, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := domain.NewProduct(1, "tiered", 1000, 100, t0)
			r := p.Revision()
			r.Tiers = tt.tiers
			got, err := p.Revise(r)
			if tt.ok {
				if err != nil {
					t.Fatalf("Revise: %v", err)
				}
				if !reflect.DeepEqual(got.Tiers(), tt.tiers) {
					t.Fatalf("Tiers = %v, want %v", got.Tiers(), tt.tiers)
				}
				return
			}
			if !errors.Is(err, domain.ErrInvalidInput) || fieldOf(err) != "tiers" {
				t.Fatalf("Revise: err = %v, want an invalid tiers field", err)
			}
		})
	}
}

func TestUnitPriceForAndAmount(t *testing.T) {
	p := tieredProduct(t, domain.PriceTier{MinQty: 5, UnitPrice: 900}, domain.PriceTier{MinQty: 20, UnitPrice: 800})
	for qty, want := range map[int]domain.Money{1: 1000, 4: 1000, 5: 900, 19: 900, 20: 800, 100: 800} {
		if got := p.UnitPriceFor(qty); got != want {
			t.Errorf("UnitPriceFor(%d) = %d, want %d", qty, got, want)
		}
		if a, err := p.Amount(qty); err != nil || a != want*domain.Money(qty) {
			t.Errorf("Amount(%d) = %d, %v; want %d", qty, a, err, want*domain.Money(qty))
		}
	}
}

// TestOrderFixesTheTierPrice: NewOrder takes the unit price for its qty, and revising the
// product later leaves the order as it was placed.
func TestOrderFixesTheTierPrice(t *testing.T) {
	p := tieredProduct(t, domain.PriceTier{MinQty: 5, UnitPrice: 900})
	o, err := domain.NewOrder("1", "buyer", p, 6, "key-12345", t0, 15*60e9)
	if err != nil {
		t.Fatal(err)
	}
	if o.UnitPrice() != 900 || o.Amount() != 5400 {
		t.Fatalf("order unit price %d amount %d, want 900 and 5400", o.UnitPrice(), o.Amount())
	}
	before := o.Record()
	r := p.Revision()
	r.Price, r.Tiers = 2000, []domain.PriceTier{{MinQty: 5, UnitPrice: 1500}}
	if _, err := p.Revise(r); err != nil {
		t.Fatal(err)
	}
	if o.Record() != before {
		t.Fatal("revising the product changed an existing order")
	}
	if o.Fingerprint() != domain.RequestFingerprint(p.ID(), 6) {
		t.Fatal("the fingerprint covers more than the product and the qty")
	}
}

// TestProductIsImmutableThroughTiers: changing a slice given to or returned by a product never
// changes the product (products are cached and shared between goroutines).
func TestProductIsImmutableThroughTiers(t *testing.T) {
	in := []domain.PriceTier{{MinQty: 5, UnitPrice: 900}}
	p := tieredProduct(t, in...)
	r := p.Revision()
	r.Tiers = in
	p, _ = p.Revise(r)
	in[0].UnitPrice = 1
	p.Tiers()[0].UnitPrice = 2
	p.Record().Tiers[0].UnitPrice = 3
	if got := p.UnitPriceFor(5); got != 900 {
		t.Fatalf("UnitPriceFor(5) = %d after changing copies, want 900", got)
	}
}

func TestReviseValidatesEveryField(t *testing.T) {
	p, _ := domain.NewProduct(1, "x", 1000, 10, t0)
	p.Freeze("audit")
	for _, tt := range []struct {
		field string
		edit  func(*domain.ProductRevision)
	}{
		{"name", func(r *domain.ProductRevision) { r.Name = " " }},
		{"price", func(r *domain.ProductRevision) { r.Price = 0 }},
		{"max_per_order", func(r *domain.ProductRevision) { r.MaxPerOrder = 0 }},
		{"stock_display", func(r *domain.ProductRevision) { r.StockDisplay = "exactly" }},
	} {
		r := p.Revision()
		tt.edit(&r)
		if _, err := p.Revise(r); fieldOf(err) != tt.field {
			t.Errorf("%s: err = %v", tt.field, err)
		}
	}
	r := p.Revision()
	r.Name, r.StockDisplay = "y", domain.StockLevel
	q, err := p.Revise(r)
	if err != nil || q.Name() != "y" || q.StockDisplay() != domain.StockLevel || !q.Frozen() || q.FrozenReason() != "audit" ||
		q.ID() != p.ID() || !q.CreatedAt().Equal(p.CreatedAt()) {
		t.Fatalf("Revise = %+v, %v: want the new name and display, the sale state, id and creation kept", q.Record(), err)
	}
	if p.Name() != "x" {
		t.Fatal("Revise changed its receiver")
	}
}

func TestStockLevelOf(t *testing.T) {
	for stock, want := range map[int64]string{-1: "none", 0: "none", 1: "few", domain.FewStockThreshold: "few",
		domain.FewStockThreshold + 1: "plenty", 1 << 40: "plenty"} {
		if got := domain.StockLevelOf(stock); got != want {
			t.Errorf("StockLevelOf(%d) = %q, want %q", stock, got, want)
		}
	}
	if d, err := domain.ParseStockDisplay(""); err != nil || d != domain.StockExact {
		t.Errorf(`ParseStockDisplay("") = %q, %v`, d, err)
	}
}
