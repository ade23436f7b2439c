package domain_test

import (
	"errors"
	"strings"
	"testing"

	"cardshop/domain"
)

// TestMinPerOrder: the minimum is 1 by default, between 1 and the maximum when revised, and
// CheckQty refuses a quantity below it as it refuses one above the maximum. A refused
// revision leaves the product as it was.
func TestMinPerOrder(t *testing.T) {
	p, err := domain.NewProduct(1, "min", 1000, 5, t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.MinPerOrder() != 1 {
		t.Fatalf("a new product's MinPerOrder = %d, want 1", p.MinPerOrder())
	}
	for _, tt := range []struct {
		min, max int
		ok       bool
	}{
		{1, 5, true}, {3, 5, true}, {5, 5, true},
		{0, 5, false}, {-1, 5, false}, {6, 5, false}, {1000, 999, false},
	} {
		r := p.Revision()
		r.MinPerOrder, r.MaxPerOrder = tt.min, tt.max
		got, err := p.Revise(r)
		var ve *domain.ValidationError
		switch {
		case tt.ok && err != nil:
			t.Errorf("min %d max %d: %v", tt.min, tt.max, err)
		case !tt.ok && (!errors.As(err, &ve) || ve.Field != "min_per_order"):
			t.Errorf("min %d max %d: err = %v, want a min_per_order ValidationError", tt.min, tt.max, err)
		case tt.ok && got.MinPerOrder() != tt.min:
			t.Errorf("min %d max %d: stored %d", tt.min, tt.max, got.MinPerOrder())
		}
		if p.MinPerOrder() != 1 || p.MaxPerOrder() != 5 {
			t.Fatal("Revise changed the product it was called on")
		}
	}
	r := p.Revision()
	r.MinPerOrder, r.Sale.BuyerLimit = 3, 2 // no buyer could order it
	if _, err := p.Revise(r); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("min 3 with buyer_limit 2: err = %v, want ErrInvalidInput", err)
	}
	r.Sale.BuyerLimit = 0
	if p, err = p.Revise(r); err != nil {
		t.Fatal(err)
	}
	for qty, ok := range map[int]bool{0: false, 1: false, 2: false, 3: true, 4: true, 5: true, 6: false} {
		if err := p.CheckQty(qty); ok != (err == nil) || (!ok && !errors.Is(err, domain.ErrQtyOutOfRange)) {
			t.Errorf("CheckQty(%d) with min 3 max 5 = %v", qty, err)
		}
	}
	if _, err := domain.NewOrder("N1", "b", p, 2, "k", t0, 1); !errors.Is(err, domain.ErrQtyOutOfRange) {
		t.Fatalf("NewOrder below the minimum: err = %v, want ErrQtyOutOfRange", err)
	}
	if got := domain.RehydrateProduct(domain.ProductRecord{ID: 1, Name: "old", Price: 1, MaxPerOrder: 2}); got.MinPerOrder() != 1 {
		t.Fatalf("a record without a minimum reads as MinPerOrder %d, want 1", got.MinPerOrder())
	}
}

// TestCheckVariant: group and label both empty or both set, trimmed, at most 64 characters.
func TestCheckVariant(t *testing.T) {
	long := strings.Repeat("卡", domain.MaxVariantText+1)
	for _, tt := range []struct {
		group, variant, field string
	}{
		{"", "", ""}, {" Steam card ", " 50 ", ""}, {strings.Repeat("卡", domain.MaxVariantText), "50", ""},
		{"", "50", "variant"}, {"Steam card", "  ", "variant"}, {long, "50", "group"}, {"Steam card", long, "variant"},
	} {
		g, v, err := domain.CheckVariant(tt.group, tt.variant)
		if tt.field == "" {
			if err != nil || g != strings.TrimSpace(tt.group) || v != strings.TrimSpace(tt.variant) {
				t.Errorf("CheckVariant(%q, %q) = %q, %q, %v", tt.group, tt.variant, g, v, err)
			}
			continue
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("CheckVariant(%q, %q): err = %v, want a %s ValidationError", tt.group, tt.variant, err, tt.field)
		}
	}
	p, _ := domain.NewProduct(1, "v", 1000, 5, t0)
	r := p.Revision()
	r.Group, r.Variant = " Steam card ", "100"
	v, err := p.Revise(r)
	if err != nil || v.Group() != "Steam card" || v.Variant() != "100" {
		t.Fatalf("Revise into a group = %q/%q, %v", v.Group(), v.Variant(), err)
	}
}
