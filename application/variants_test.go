package application_test

import (
	"errors"
	"slices"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// TestCatalogueGroupsVariants: the snapshot lists every variant as its own item (own price,
// minimum, status and stock) and groups them: Variants lists a group's items by id, Entries
// holds one entry per group (its first variant) and every product on its own, in id order.
func TestCatalogueGroupsVariants(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	variant := func(label string, price domain.Money, codes int) domain.Product {
		p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "Steam " + label, Price: price,
			MinPerOrder: 2, MaxPerOrder: 5, Group: "Steam card", Variant: label})
		if err != nil {
			t.Fatal(err)
		}
		if codes > 0 {
			f.addCodes(t, p.ID(), codes)
		}
		return p
	}
	v50 := variant("50", 5000, 4)
	alone := f.createProduct(t, 5, 1)
	v100 := variant("100", 10000, 0)
	snap := f.catalogue(t)

	vs := snap.Variants("Steam card")
	if len(vs) != 2 || vs[0].ID != v50.ID() || vs[1].ID != v100.ID() {
		t.Fatalf("Variants = %+v, want 50 then 100", vs)
	}
	if vs[0].Variant != "50" || vs[0].Price != 5000 || vs[0].MinPerOrder != 2 || vs[0].Stock != 4 ||
		vs[0].Status != application.CatalogueOnSale || vs[1].Status != application.CatalogueSoldOut {
		t.Errorf("variants %+v", vs)
	}
	if snap.Variants("") != nil || len(snap.Variants("no such group")) != 0 {
		t.Error("Variants of no group is not empty")
	}
	ids := func(items []application.CatalogueItem) []domain.ProductID {
		var out []domain.ProductID
		for _, it := range items {
			out = append(out, it.ID)
		}
		return out
	}
	if got, want := ids(snap.Entries()), []domain.ProductID{v50.ID(), alone.ID()}; !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	// Leaving the group: the product is an entry of its own at the next ledger read.
	empty := ""
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, v50.ID(), application.ProductPatch{Group: &empty, Variant: &empty}); err != nil {
		t.Fatal(err)
	}
	snap = f.catalogue(t)
	if got, want := ids(snap.Entries()), []domain.ProductID{v50.ID(), alone.ID(), v100.ID()}; !slices.Equal(got, want) {
		t.Fatalf("Entries after v50 left = %v, want %v", got, want)
	}
	// A refused change changes nothing.
	two := 6
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, v100.ID(), application.ProductPatch{MinPerOrder: &two}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("min above max: err = %v, want ErrInvalidInput", err)
	}
	if p, _ := f.shop.Catalogue.Product(f.ctx, v100.ID()); p.MinPerOrder() != 2 || p.Group() != "Steam card" {
		t.Fatalf("after a refused change: min %d group %q", p.MinPerOrder(), p.Group())
	}
	if _, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "x", Price: 1, MinPerOrder: -1, MaxPerOrder: 5}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("negative minimum: err = %v, want ErrInvalidInput", err)
	}
}
