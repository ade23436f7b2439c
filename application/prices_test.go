package application_test

import (
	"errors"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

func (f *fixture) createTiered(t *testing.T, tiers []domain.PriceTier, codes int) domain.Product {
	t.Helper()
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "wholesale", Price: 1000, MaxPerOrder: 50, Tiers: tiers})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	f.addCodes(t, p.ID(), codes)
	return p
}

// TestOrderPriceIsFixedAtPlacement: an order pays the tier for its qty; a later price change
// leaves it (and its replay) as placed, and the next order on this instance pays the new price.
func TestOrderPriceIsFixedAtPlacement(t *testing.T) {
	f := newFixture(t)
	p := f.createTiered(t, []domain.PriceTier{{MinQty: 5, UnitPrice: 900}, {MinQty: 10, UnitPrice: 800}}, 40)
	key := f.newKey()
	placed, err := f.place("buyer-1", p.ID(), 6, key)
	if err != nil {
		t.Fatal(err)
	}
	o := placed.Order
	if o.UnitPrice() != 900 || o.Amount() != 5400 {
		t.Fatalf("order of 6: unit price %d, amount %d; want 900 and 5400", o.UnitPrice(), o.Amount())
	}
	if small := f.mustPlace(t, "buyer-2", p.ID(), 2); small.UnitPrice() != 1000 || small.Amount() != 2000 {
		t.Fatalf("order of 2: unit price %d, amount %d; want the base price", small.UnitPrice(), small.Amount())
	}

	price, tiers := domain.Money(1500), []domain.PriceTier{{MinQty: 5, UnitPrice: 1400}}
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{Price: &price, Tiers: &tiers}); err != nil {
		t.Fatal(err)
	}
	if stored := f.order(t, o.No()); stored.Record() != o.Record() {
		t.Fatalf("the price change changed an existing order: %+v, was %+v", stored.Record(), o.Record())
	}
	again, err := f.place("buyer-1", p.ID(), 6, key)
	if err != nil || !again.Replayed || again.Order.No() != o.No() || again.Order.Amount() != 5400 {
		t.Fatalf("replay after the price change = %+v (replayed %v), %v; want the original order at 5400", again.Order.Record(), again.Replayed, err)
	}
	if next := f.mustPlace(t, "buyer-3", p.ID(), 6); next.UnitPrice() != 1400 || next.Amount() != 8400 {
		t.Fatalf("order after the change on this instance: unit price %d, want 1400 at once", next.UnitPrice())
	}
	if _, err := f.pay(t, o.No()); err != nil {
		t.Fatalf("paying the original amount after the change: %v", err)
	}
}

// TestAnotherInstanceSeesAPriceChangeWithinTheCacheTTL: a shop that cached the product before
// another shop changed it places orders at the old price until its cache entry expires, never
// later.
func TestAnotherInstanceSeesAPriceChangeWithinTheCacheTTL(t *testing.T) {
	f := newFixture(t)
	p := f.createTiered(t, nil, 10)
	other, err := application.New(f.cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue, Publisher: f.pub,
		Verifier: f.signer, Alerter: f.alerts, Clock: f.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	placeOther := func(buyer domain.BuyerID) domain.Order {
		t.Helper()
		res, err := other.Sales.PlaceOrder(f.ctx, application.PlaceOrder{Buyer: buyer, Product: p.ID(), Qty: 1, IdempotencyKey: f.newKey()})
		if err != nil {
			t.Fatal(err)
		}
		f.track(res.Order)
		return res.Order
	}
	if o := placeOther("buyer-1"); o.UnitPrice() != 1000 {
		t.Fatalf("unit price %d, want 1000", o.UnitPrice())
	}
	price := domain.Money(1200)
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{Price: &price}); err != nil {
		t.Fatal(err)
	}
	ttl := other.Config().ProductCacheTTL
	f.clock.Advance(ttl - 1)
	if o := placeOther("buyer-2"); o.UnitPrice() != 1000 {
		t.Fatalf("within the cache TTL: unit price %d, want the cached 1000", o.UnitPrice())
	}
	f.clock.Advance(1)
	if o := placeOther("buyer-3"); o.UnitPrice() != 1200 {
		t.Fatalf("after the cache TTL: unit price %d, want 1200", o.UnitPrice())
	}
}

// TestUpdateProductRefusesBadChanges: an invalid result changes nothing; an unknown product is
// not found.
func TestUpdateProductRefusesBadChanges(t *testing.T) {
	f := newFixture(t)
	p := f.createTiered(t, []domain.PriceTier{{MinQty: 5, UnitPrice: 900}}, 1)
	before, _ := f.shop.Catalogue.Product(f.ctx, p.ID())
	low, one, bad, display := domain.Money(800), 4, []domain.PriceTier{{MinQty: 1, UnitPrice: 900}}, domain.StockDisplay("maybe")
	for name, patch := range map[string]application.ProductPatch{
		"price below a tier": {Price: &low},
		"limit below a tier": {MaxPerOrder: &one},
		"tier at 1":          {Tiers: &bad},
		"unknown display":    {StockDisplay: &display},
	} {
		if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), patch); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
	after, _ := f.shop.Catalogue.Product(f.ctx, p.ID())
	if after.Price() != before.Price() || after.MaxPerOrder() != before.MaxPerOrder() || len(after.Tiers()) != 1 {
		t.Fatalf("a refused change changed the product: %+v", after.Record())
	}
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, 987654, application.ProductPatch{Price: &low}); !errors.Is(err, domain.ErrProductNotFound) {
		t.Fatalf("unknown product: err = %v, want ErrProductNotFound", err)
	}
	none := []domain.PriceTier{}
	q, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{Tiers: &none, Price: &low})
	if err != nil || q.Tiers() != nil || q.Price() != 800 {
		t.Fatalf("removing the tiers: %+v, %v", q.Record(), err)
	}
}
