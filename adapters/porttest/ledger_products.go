package porttest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// runProducts checks the product repository: Create assigns an id to a zero id, keeps an
// explicit one and refuses a taken one; an unknown id is ErrProductNotFound; Products lists
// them in id order; SetFrozen freezes and unfreezes; a description (lines, markup kept as
// text, four-byte characters) is stored as written, up to domain.MaxDescription characters.
func runProducts(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("create assigns an id to a zero id", func(t *testing.T) {
		l := newLedger(t)
		p, err := domain.NewProduct(0, "porttest assigned", 250, 5, now())
		if err != nil {
			t.Fatal(err)
		}
		r := p.Revision()
		r.Tiers, r.StockDisplay = []domain.PriceTier{{MinQty: 3, UnitPrice: 200}}, domain.StockLevel
		r.MinPerOrder, r.Group, r.Variant = 2, "Steam 充值卡 · Steam card", "100 元"
		// A description as an operator writes one: lines, a tab, markup kept as text, and
		// characters outside the Basic Multilingual Plane (four bytes in UTF-8).
		r.Description = "充值卡 🃏 for <b>Steam</b> & \"friends\"\n\n\tline two\nlast 'line'"
		if p, err = p.Revise(r); err != nil {
			t.Fatal(err)
		}
		created, err := l.Products().Create(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if created.ID() <= 0 {
			t.Fatalf("Create assigned id %d, want a positive id", created.ID())
		}
		wantProduct(t, l, created)
	})

	t.Run("a description of the longest length is stored whole", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		r := p.Revision()
		// MaxDescription characters, each of four bytes in UTF-8.
		r.Description = strings.Repeat("🃏", domain.MaxDescription-1) + "卡"
		revised, err := p.Revise(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Products().Update(t.Context(), revised); err != nil {
			t.Fatal(err)
		}
		wantProduct(t, l, revised)
		fresh, err := domain.NewProduct(0, "porttest long description", 100, 1, now())
		if err != nil {
			t.Fatal(err)
		}
		fr := fresh.Revision()
		fr.Description = r.Description
		if fresh, err = fresh.Revise(fr); err != nil {
			t.Fatal(err)
		}
		created, err := l.Products().Create(t.Context(), fresh)
		if err != nil {
			t.Fatal(err)
		}
		wantProduct(t, l, created)
	})

	t.Run("create keeps an explicit id and refuses a taken one", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		wantProduct(t, l, p)
		again, _ := domain.NewProduct(p.ID(), "porttest again", 100, 1, now())
		if _, err := l.Products().Create(t.Context(), again); !errors.Is(err, domain.ErrProductExists) {
			t.Fatalf("Create with a taken id: err = %v, want ErrProductExists", err)
		}
		wantProduct(t, l, p)
	})

	t.Run("unknown product is not found", func(t *testing.T) {
		l := newLedger(t)
		if _, err := l.Products().Product(t.Context(), NewProductID()); !errors.Is(err, domain.ErrProductNotFound) {
			t.Fatalf("Product(unknown): err = %v, want ErrProductNotFound", err)
		}
		if err := l.Products().SetFrozen(t.Context(), NewProductID(), true, "x"); !errors.Is(err, domain.ErrProductNotFound) {
			t.Fatalf("SetFrozen(unknown): err = %v, want ErrProductNotFound", err)
		}
	})

	t.Run("list holds the products in id order", func(t *testing.T) {
		l := newLedger(t)
		a, b := createProduct(t, l), createProduct(t, l)
		all, err := l.Products().Products(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(all, func(x, y domain.Product) int { return cmpInt(x.ID(), y.ID()) }) {
			t.Fatal("Products is not ordered by id")
		}
		for _, want := range []domain.Product{a, b} {
			i := slices.IndexFunc(all, func(p domain.Product) bool { return p.ID() == want.ID() })
			if i < 0 {
				t.Fatalf("Products lacks product %d", want.ID())
			}
			if got := productRecord(all[i]); !reflect.DeepEqual(got, productRecord(want)) {
				t.Fatalf("Products has %+v, want %+v", got, productRecord(want))
			}
		}
	})

	t.Run("freeze and unfreeze", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		if err := l.Products().SetFrozen(t.Context(), p.ID(), true, "pool short"); err != nil {
			t.Fatal(err)
		}
		frozen := p
		frozen.Freeze("pool short")
		wantProduct(t, l, frozen)
		if err := l.Products().SetFrozen(t.Context(), p.ID(), false, ""); err != nil {
			t.Fatal(err)
		}
		wantProduct(t, l, p)
	})

	t.Run("update stores the revisable fields and keeps the sale state", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		if err := l.Products().SetFrozen(t.Context(), p.ID(), true, "audit"); err != nil {
			t.Fatal(err)
		}
		r := p.Revision()
		r.Name, r.Price, r.MaxPerOrder, r.StockDisplay = "porttest revised", 700, 50, domain.StockLevel
		r.Description = "revised\ndescription"
		r.MinPerOrder, r.Group, r.Variant = 2, "Steam card", "200" // at most the buyer limit below
		r.Tiers = []domain.PriceTier{{MinQty: 10, UnitPrice: 650}, {MinQty: 50, UnitPrice: 600}}
		// Sub-millisecond and local times: stored to the millisecond, in UTC.
		starts := time.Date(2031, 5, 4, 20, 0, 0, 123_456_789, time.FixedZone("UTC+8", 8*3600))
		r.Sale = domain.SaleRules{StartsAt: starts, EndsAt: starts.Add(time.Hour), BuyerLimit: 2}
		r.RefundReleasesLimit, r.LowStockThreshold = true, 25
		revised, err := p.Revise(r) // p is unfrozen here: Update must not store that
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Products().Update(t.Context(), revised); err != nil {
			t.Fatal(err)
		}
		want, _ := p.Revise(r)
		want.Freeze("audit")
		wantProduct(t, l, want)
		if got := want.Sale().StartsAt; got.Nanosecond() != 123_000_000 || got.Location() != time.UTC {
			t.Fatalf("StartsAt stored as %v, want millisecond precision in UTC", got)
		}
		r.Tiers, r.Sale = nil, domain.SaleRules{} // and back to no window, no limit, no group
		r.MinPerOrder, r.Group, r.Variant, r.Description = 1, "", "", ""
		plain, _ := p.Revise(r)
		if err := l.Products().Update(t.Context(), plain); err != nil {
			t.Fatal(err)
		}
		want, _ = p.Revise(r)
		want.Freeze("audit")
		wantProduct(t, l, want)
		if err := l.Products().Update(t.Context(), plain.WithID(NewProductID())); !errors.Is(err, domain.ErrProductNotFound) {
			t.Fatalf("Update(unknown): err = %v, want ErrProductNotFound", err)
		}
	})
}
