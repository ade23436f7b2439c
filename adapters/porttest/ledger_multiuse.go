package porttest

import (
	"errors"
	"sync"
	"testing"

	"cardshop/domain"
)

// runMultiUse checks the card pool of a multi-use product (domain.Product.CodeUses): Import
// adds a card per use and counts uses, a shared key's import tops it up; Allocate gives an
// order distinct codes, spreads the uses over the codes, refuses an order its codes cannot
// serve without a repeat and changes nothing then; Reclaim and Void work per use; concurrent
// allocations never sell a use twice nor a code more often than its uses.
func runMultiUse(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("import adds a card per use and counts the uses", func(t *testing.T) {
		l := newLedger(t)
		p, q := createProduct(t, l).ID(), createProduct(t, l).ID()
		c := newCodes(t, 3)
		importUses(t, l, p, []domain.CardCode{c[0], c[1], c[2], c[0]}, 4, domain.ImportResult{Added: 3, Uses: 12, Duplicates: 1})
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 12})
		importUses(t, l, p, c[:1], 4, domain.ImportResult{Duplicates: 1})
		importUses(t, l, q, c[1:2], 1, domain.ImportResult{InPool: 1})
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 12})
		for _, uses := range []int{-1, domain.MaxCodeUses + 1} {
			if _, err := l.Cards().Import(t.Context(), p, newCodes(t, 1), uses); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Import with %d uses: err = %v, want ErrInvalidInput", uses, err)
			}
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 12})
	})

	t.Run("a shared key's every import adds SharedKeyUses uses", func(t *testing.T) {
		l := newLedger(t)
		p, q := createProduct(t, l).ID(), createProduct(t, l).ID()
		key := newCodes(t, 1)
		importUses(t, l, p, key, domain.UnlimitedUses, domain.ImportResult{Added: 1, Uses: domain.SharedKeyUses})
		importUses(t, l, p, []domain.CardCode{key[0], key[0]}, domain.UnlimitedUses,
			domain.ImportResult{Added: 1, Duplicates: 1, Uses: domain.SharedKeyUses})
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 2 * domain.SharedKeyUses})
		importUses(t, l, q, key, domain.UnlimitedUses, domain.ImportResult{InPool: 1})
		wantCounts(t, l, q, domain.CardCounts{})
		no := newOrderNo()
		got := allocate(t, l, p, no, 1)
		if got[0].Code.Reveal() != key[0].Reveal() {
			t.Fatalf("Allocate sold another code than the shared key")
		}
		if _, err := l.Cards().Allocate(t.Context(), p, newOrderNo(), 2); !errors.Is(err, domain.ErrTooFewDistinctCodes) {
			t.Fatalf("Allocate 2 of one shared key: err = %v, want ErrTooFewDistinctCodes", err)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 2*domain.SharedKeyUses - 1, domain.CardSold: 1})
	})

	t.Run("race: concurrent imports of a shared key each add their uses", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		key := newCodes(t, 1)
		const imports = 4
		errs := make([]error, imports)
		parallel(imports, func(i int) {
			errs[i] = l.Atomically(t.Context(), func(tx domain.Store) error {
				res, err := tx.Cards().Import(t.Context(), p, key, domain.UnlimitedUses)
				if err == nil && (res.Added != 1 || res.Uses != domain.SharedKeyUses) {
					t.Errorf("Import = %+v", res)
				}
				return err
			})
		})
		for _, err := range errs {
			if err != nil {
				t.Fatalf("import: %v", err)
			}
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: imports * domain.SharedKeyUses})
	})

	t.Run("allocate gives an order distinct codes, every code's first use first", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 3)
		importUses(t, l, p, codes, 2, domain.ImportResult{Added: 3, Uses: 6})
		for range 2 {
			no := newOrderNo()
			checkAllocation(t, allocate(t, l, p, no, 3), p, no, 3, codes)
		}
		if _, err := l.Cards().Allocate(t.Context(), p, newOrderNo(), 1); !errors.Is(err, domain.ErrInsufficientCards) {
			t.Fatalf("Allocate when every use is sold: err = %v, want ErrInsufficientCards", err)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 6})
	})

	t.Run("an order its codes cannot serve without a repeat is refused and changes nothing", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 2)
		importUses(t, l, p, codes, 3, domain.ImportResult{Added: 2, Uses: 6})
		no := newOrderNo()
		if _, err := l.Cards().Allocate(t.Context(), p, no, 3); !errors.Is(err, domain.ErrTooFewDistinctCodes) {
			t.Fatalf("Allocate 3 of 2 codes of 3 uses: err = %v, want ErrTooFewDistinctCodes", err)
		}
		if cards, _ := l.Cards().Cards(t.Context(), no); len(cards) != 0 {
			t.Fatalf("refused allocation left cards %v on the order", ids(cards))
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 6})
		checkAllocation(t, allocate(t, l, p, no, 2), p, no, 2, codes)
		// One use of each left after two more orders of one: two codes, so 2 is served again.
		allocate(t, l, p, newOrderNo(), 1)
		allocate(t, l, p, newOrderNo(), 1)
		last := newOrderNo()
		checkAllocation(t, allocate(t, l, p, last, 2), p, last, 2, codes)
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 6})
	})

	t.Run("reclaim recycles or voids the order's uses only", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 2)
		importUses(t, l, p, codes, 2, domain.ImportResult{Added: 2, Uses: 4})
		a, b := newOrderNo(), newOrderNo()
		checkAllocation(t, allocate(t, l, p, a, 2), p, a, 2, codes)
		checkAllocation(t, allocate(t, l, p, b, 2), p, b, 2, codes)
		reclaim(t, l, a, domain.CardRecycled, 2)
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 2, domain.CardRecycled: 2})
		if cards, err := l.Cards().Cards(t.Context(), b); err != nil || len(cards) != 2 {
			t.Fatalf("Cards of the other order after a refund = %v, %v; want its 2", ids(cards), err)
		}
		reclaim(t, l, b, domain.CardVoid, 2)
		wantCounts(t, l, p, domain.CardCounts{domain.CardRecycled: 2, domain.CardVoid: 2})
		c := newOrderNo()
		checkAllocation(t, allocate(t, l, p, c, 2), p, c, 2, codes)
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 2, domain.CardVoid: 2})
	})

	t.Run("void takes every sellable use of a code", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 2)
		importUses(t, l, p, codes, 3, domain.ImportResult{Added: 2, Uses: 6})
		sold := allocate(t, l, p, newOrderNo(), 1)[0].Code
		got, err := l.Cards().Void(t.Context(), p, []domain.CardCode{sold, sold})
		if want := (domain.VoidResult{Voided: 1, Uses: 2, NotVoidable: 1}); err != nil || got != want {
			t.Fatalf("Void = %+v, %v; want %+v", got, err, want)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 1, domain.CardVoid: 2, domain.CardUnsold: 3})
		if _, err := l.Cards().Allocate(t.Context(), p, newOrderNo(), 2); !errors.Is(err, domain.ErrTooFewDistinctCodes) {
			t.Fatalf("Allocate 2 with one code left: err = %v, want ErrTooFewDistinctCodes", err)
		}
	})

	t.Run("race: 40 allocations never sell a use twice nor a code past its uses", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		const codes, uses = 10, 5
		importUses(t, l, p, newCodes(t, codes), uses, domain.ImportResult{Added: codes, Uses: codes * uses})
		var mu sync.Mutex
		soldTo := map[int64]domain.OrderNo{}
		perCode := map[string]int{}
		total := 0
		parallel(40, func(i int) {
			no, qty := newOrderNo(), i%3+1
			var got []domain.Card
			err := l.Atomically(t.Context(), func(tx domain.Store) error {
				cards, err := tx.Cards().Allocate(t.Context(), p, no, qty)
				got = cards // fn may run again on a retry: keep the last run's result
				return err
			})
			if err != nil {
				if !errors.Is(err, domain.ErrInsufficientCards) && !errors.Is(err, domain.ErrTooFewDistinctCodes) {
					t.Errorf("Allocate: %v", err)
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != qty {
				t.Errorf("Allocate(%d) returned %d cards", qty, len(got))
			}
			total += len(got)
			inOrder := map[string]bool{}
			for _, c := range got {
				if prev, dup := soldTo[c.ID]; dup {
					t.Errorf("card %d sold to %s and %s", c.ID, prev, no)
				}
				if inOrder[c.Code.Reveal()] {
					t.Errorf("order %s got a code twice", no)
				}
				soldTo[c.ID], inOrder[c.Code.Reveal()] = no, true
				perCode[c.Code.Reveal()]++
			}
		})
		for _, n := range perCode {
			if n > uses {
				t.Fatalf("a code sold %d times, it has %d uses", n, uses)
			}
		}
		if total == 0 || total > codes*uses {
			t.Fatalf("allocated %d uses from a pool of %d", total, codes*uses)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: int64(total), domain.CardUnsold: int64(codes*uses - total)})
	})
}

func importUses(t *testing.T, l domain.Store, p domain.ProductID, codes []domain.CardCode, uses int, want domain.ImportResult) {
	t.Helper()
	got, err := l.Cards().Import(t.Context(), p, codes, uses)
	if err != nil || got.Added != want.Added || got.Uses != want.Uses || got.Duplicates != want.Duplicates || got.InPool != want.InPool {
		t.Fatalf("Import(%d uses) = %+v, %v; want %+v", uses, got, err, want)
	}
}
