package application_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// createMultiUse creates a product whose codes are sold uses times each, with codes of them.
func (f *fixture) createMultiUse(t *testing.T, limit, uses, codes int) domain.Product {
	t.Helper()
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "shared licence", Price: testPrice,
		MaxPerOrder: limit, CodeUses: uses})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	rep := f.importLines(t, p.ID(), strings.Join(f.newCodes(codes), "\n"))
	if rep.Added != codes || rep.Uses != codes*uses {
		t.Fatalf("import of %d codes of %d uses: %+v", codes, uses, rep)
	}
	return p
}

// A multi-use product: the gate's stock is the codes' uses; an order gets distinct codes, each
// use is sold once, and the refund rules apply per use.
func TestMultiUseCodesCountUses(t *testing.T) {
	f := newFixture(t)
	p := f.createMultiUse(t, 3, 2, 3)
	if lv := f.levels(t, p.ID()); lv.Stock != 6 {
		t.Fatalf("gate stock %d, want 6 (3 codes of 2 uses)", lv.Stock)
	}
	a := f.mustPlace(t, "alice", p.ID(), 3)
	f.mustPay(t, a.No())
	b := f.mustPlace(t, "bob", p.ID(), 3)
	f.mustPay(t, b.No())
	for _, no := range []domain.OrderNo{a.No(), b.No()} {
		codes := map[string]bool{}
		for _, c := range f.soldCards(t, no) {
			codes[c.Code.Reveal()] = true
		}
		if len(codes) != 3 {
			t.Fatalf("order %s got %d distinct codes, want 3", no, len(codes))
		}
	}
	f.assertInvariants(t, p.ID())
	// Alice read her codes: her refund voids her uses; Bob's gives his back.
	if _, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", a.No()); err != nil {
		t.Fatal(err)
	}
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: a.No(), Reason: "test"}); err != nil || res.Voided != 3 {
		t.Fatalf("refund of a revealed order: %+v, %v; want 3 voided", res, err)
	}
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: b.No(), Reason: "test"}); err != nil || res.Recycled != 3 {
		t.Fatalf("refund of an unrevealed order: %+v, %v; want 3 recycled", res, err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 3 {
		t.Fatalf("gate stock %d after the refunds, want 3 (the recycled uses)", lv.Stock)
	}
	f.assertInvariants(t, p.ID())
}

// An order of more units than the product has codes left with a use waits UNFULFILLED with an
// alert; the product is not frozen (gate and ledger agree), and a restock fills it.
func TestMultiUseOrderOfMoreCodesThanThePoolWaits(t *testing.T) {
	f := newFixture(t)
	p := f.createMultiUse(t, 3, 5, 2)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	got, err := f.pay(t, o.No())
	if err != nil || got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("pay: %s, %v; want UNFULFILLED", got.Status(), err)
	}
	if q, _ := f.ledger.Products().Product(f.ctx, p.ID()); q.Frozen() {
		t.Fatal("a shortage of distinct codes froze the product")
	}
	if !hasKind(f.alertsFor(o.No()), "paid_unfulfilled") {
		t.Fatalf("no paid_unfulfilled alert: %v", f.alertsFor(o.No()))
	}
	f.assertInvariants(t, p.ID())
	rep := f.importLines(t, p.ID(), strings.Join(f.newCodes(1), "\n"))
	if rep.Filled != 1 || f.order(t, o.No()).Status() != domain.StatusPaid {
		t.Fatalf("restock filled %d, order %s; want the order PAID", rep.Filled, f.order(t, o.No()).Status())
	}
	f.assertInvariants(t, p.ID())
}

// code_uses is fixed once the product exists.
func TestMultiUseCodeUsesAreFixed(t *testing.T) {
	f := newFixture(t)
	p := f.createMultiUse(t, 3, 4, 1)
	same, other := 4, 2
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{CodeUses: &same}); err != nil {
		t.Fatalf("update repeating the code uses: %v", err)
	}
	_, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{CodeUses: &other})
	is(t, "update changing the code uses", err, domain.ErrInvalidInput)
	for _, bad := range []int{-1, domain.MaxCodeUses + 1} {
		_, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "x", Price: testPrice, MaxPerOrder: 1, CodeUses: bad})
		is(t, fmt.Sprintf("create with %d uses", bad), err, domain.ErrInvalidInput)
	}
	shared, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "key", Price: testPrice, MaxPerOrder: 1, SharedKey: true})
	if err != nil || shared.CodeUses() != domain.UnlimitedUses {
		t.Fatalf("create a shared key product: %v, uses %d", err, shared.CodeUses())
	}
	key := f.newCodes(1)[0]
	f.importLines(t, shared.ID(), key)
	if rep := f.importLines(t, shared.ID(), key); rep.Added != 1 || rep.Uses != domain.SharedKeyUses {
		t.Fatalf("a shared key imported again: %+v, want %d more uses", rep, domain.SharedKeyUses)
	}
	if lv := f.levels(t, shared.ID()); lv.Stock != 2*domain.SharedKeyUses {
		t.Fatalf("gate stock %d, want %d", lv.Stock, 2*domain.SharedKeyUses)
	}
	f.assertInvariants(t, shared.ID())
}

// Many buyers place, pay and refund orders of a multi-use product at once; at rest every
// invariant holds, counted in uses: SOLD uses = Σ qty of PAID orders, gate = ledger, no order
// holds a code twice, no code is sold more often than its uses.
func TestMultiUseConcurrentSaleKeepsTheInvariants(t *testing.T) {
	f := newFixture(t)
	const codes, uses, buyers, limit = 20, 4, 120, 3
	p := f.createMultiUse(t, limit, uses, codes)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []domain.Order
	for i := range buyers {
		wg.Go(func() {
			placed, err := f.place(domain.BuyerID(fmt.Sprintf("buyer-%03d", i)), p.ID(), 1+i%limit, fmt.Sprintf("mu-key-%04d", i))
			if err != nil {
				if !errors.Is(err, domain.ErrSoldOut) {
					t.Errorf("place %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			won = append(won, placed.Order)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(won) == 0 {
		t.Fatal("no order placed")
	}

	paid := make([]domain.Order, len(won))
	for i, o := range won {
		wg.Go(func() {
			got, err := f.pay(t, o.No())
			if err != nil {
				t.Errorf("pay %s: %v", o.No(), err)
			}
			paid[i] = got
		})
	}
	wg.Wait()
	f.assertInvariants(t, p.ID())

	// Every other paid order is refunded at once; half of those were read first (refund-void).
	for i, o := range paid {
		if o.Status() != domain.StatusPaid || i%2 != 0 {
			continue
		}
		wg.Go(func() {
			if i%4 == 0 {
				if _, err := f.shop.Sales.BuyerOrder(f.ctx, o.Buyer(), o.No()); err != nil {
					t.Errorf("read %s: %v", o.No(), err)
				}
			}
			if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Reason: "test"}); err != nil {
				t.Errorf("refund %s: %v", o.No(), err)
			}
		})
	}
	// Meanwhile new buyers take the recycled uses.
	for i := range 40 {
		wg.Go(func() {
			placed, err := f.place(domain.BuyerID(fmt.Sprintf("late-%03d", i)), p.ID(), 1+i%limit, fmt.Sprintf("mu-late-%04d", i))
			if err != nil {
				if !errors.Is(err, domain.ErrSoldOut) {
					t.Errorf("place late %d: %v", i, err)
				}
				return
			}
			if _, err := f.pay(t, placed.Order.No()); err != nil {
				t.Errorf("pay late %s: %v", placed.Order.No(), err)
			}
		})
	}
	wg.Wait()
	f.assertInvariants(t, p.ID())
}
