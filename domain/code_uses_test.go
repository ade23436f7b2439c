package domain_test

import (
	"errors"
	"testing"
	"time"

	"cardshop/domain"
)

// A product sells each code once unless created otherwise; its code uses survive a revision
// and storage, and a shared key's import adds SharedKeyUses.
func TestProductCodeUses(t *testing.T) {
	p, err := domain.NewProduct(1, "licence", 100, 5, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if p.CodeUses() != 1 || p.UsesPerImport() != 1 {
		t.Fatalf("a new product: uses %d, per import %d; want 1 and 1", p.CodeUses(), p.UsesPerImport())
	}
	// A record without the setting (made before it existed) is a product of one use a code:
	// only SharedKey makes one unlimited.
	if got := domain.RehydrateProduct(domain.ProductRecord{ID: 1, Name: "old", Price: 1, MaxPerOrder: 2}); got.CodeUses() != 1 {
		t.Fatalf("a record without code uses: %d, want 1", got.CodeUses())
	}
	for _, c := range []struct {
		uses, perImport int
		ok              bool
	}{
		{1, 1, true}, {2, 2, true}, {domain.MaxCodeUses, domain.MaxCodeUses, true},
		{domain.UnlimitedUses, domain.SharedKeyUses, true},
		{-1, 0, false}, {domain.MaxCodeUses + 1, 0, false},
	} {
		q, err := p.WithCodeUses(c.uses)
		if !c.ok {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Errorf("WithCodeUses(%d): %v, want ErrInvalidInput", c.uses, err)
			}
			continue
		}
		if err != nil || q.CodeUses() != c.uses || q.UsesPerImport() != c.perImport {
			t.Errorf("WithCodeUses(%d) = uses %d, per import %d, %v; want %d", c.uses, q.CodeUses(), q.UsesPerImport(), err, c.perImport)
		}
		r := q.Revision()
		r.Price = 200
		revised, err := q.Revise(r)
		if err != nil || revised.CodeUses() != c.uses {
			t.Errorf("Revise changed the code uses %d to %d (%v)", c.uses, revised.CodeUses(), err)
		}
		if back := domain.RehydrateProduct(q.Record()); back.CodeUses() != c.uses {
			t.Errorf("stored and read back: uses %d, want %d", back.CodeUses(), c.uses)
		}
	}
}
