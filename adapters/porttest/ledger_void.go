package porttest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// runVoid checks CardVault.Void and ProductCatalog.LockFrozen: Void voids exactly the
// product's sellable codes and counts the others (not found, not voidable, repeats), is
// undone with its transaction, never lets an allocation take a voided code, and of concurrent
// voids of overlapping lists each code is voided once; LockFrozen reports the frozen flag and
// holds the product for the transaction.
func runVoid(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("void moves the product's sellable codes to VOID and counts the rest", func(t *testing.T) {
		l := newLedger(t)
		p, q := createProduct(t, l).ID(), createProduct(t, l).ID()
		c := newCodes(t, 6)
		importCodes(t, l, p, c[:4], domain.ImportResult{Added: 4})
		importCodes(t, l, q, c[4:5], domain.ImportResult{Added: 1})
		sold := allocate(t, l, p, newOrderNo(), 1)[0].Code // one of c[:4], SOLD now
		recycledNo := newOrderNo()
		recycled := allocate(t, l, p, recycledNo, 1)[0].Code
		reclaim(t, l, recycledNo, domain.CardRecycled, 1)
		var unsold []domain.CardCode
		for _, x := range c[:4] {
			if x != sold && x != recycled {
				unsold = append(unsold, x)
			}
		}
		// unsold[0] and recycled are voided; sold, another product's code, an unknown code, and
		// a repeat of a voided one are counted.
		got, err := l.Cards().Void(t.Context(), p, []domain.CardCode{unsold[0], sold, c[4], c[5], recycled, unsold[0]})
		want := domain.VoidResult{Voided: 2, Uses: 2, NotFound: 1, NotVoidable: 3}
		if err != nil || got != want {
			t.Fatalf("Void = %+v, %v; want %+v", got, err, want)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 1, domain.CardSold: 1, domain.CardVoid: 2})
		wantCounts(t, l, q, domain.CardCounts{domain.CardUnsold: 1})
		// Voided codes are never allocated: one code is left.
		if _, err := l.Cards().Allocate(t.Context(), p, newOrderNo(), 2); !errors.Is(err, domain.ErrInsufficientCards) {
			t.Fatalf("Allocate(2) with one sellable code: err = %v, want ErrInsufficientCards", err)
		}
		if left := allocate(t, l, p, newOrderNo(), 1)[0].Code; left != unsold[1] {
			t.Fatal("the code left after the void is not the one that was not voided")
		}
		// Voiding again: every code is now not voidable; an unknown one stays not found.
		got, err = l.Cards().Void(t.Context(), p, []domain.CardCode{unsold[0], c[5], c[5]})
		if want := (domain.VoidResult{NotFound: 2, NotVoidable: 1}); err != nil || got != want {
			t.Fatalf("second Void = %+v, %v; want %+v", got, err, want)
		}
	})

	t.Run("void of an empty code is refused and changes nothing", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		c := newCodes(t, 1)
		importCodes(t, l, p, c, domain.ImportResult{Added: 1})
		if _, err := l.Cards().Void(t.Context(), p, []domain.CardCode{c[0], {}}); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("Void with an empty code: err = %v, want ErrInvalidInput", err)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 1})
	})

	t.Run("a void is undone with its transaction", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		c := newCodes(t, 3)
		importCodes(t, l, p, c, domain.ImportResult{Added: 3})
		boom := errors.New("boom")
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if res, err := tx.Cards().Void(t.Context(), p, c[:2]); err != nil || res.Voided != 2 {
				t.Errorf("Void in a transaction = %+v, %v", res, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Atomically: %v", err)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 3})
		allocate(t, l, p, newOrderNo(), 3)
	})

	t.Run("race: concurrent voids of overlapping lists void each code once", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		c := newCodes(t, 40)
		importCodes(t, l, p, c, domain.ImportResult{Added: 40})
		const voiders = 8
		var mu sync.Mutex
		voided := 0
		parallel(voiders, func(i int) {
			// Each list is 10 consecutive codes starting at 4*i (wrapping): neighbours overlap.
			list := make([]domain.CardCode, 10)
			for j := range list {
				list[j] = c[(4*i+j)%len(c)]
			}
			var res domain.VoidResult
			err := l.Atomically(t.Context(), func(tx domain.Store) error {
				var err error
				res, err = tx.Cards().Void(t.Context(), p, list)
				return err
			})
			if err != nil {
				t.Errorf("Void: %v", err)
				return
			}
			if res.Voided+res.NotVoidable != len(list) || res.NotFound != 0 {
				t.Errorf("Void of 10 of the product's codes = %+v", res)
			}
			mu.Lock()
			voided += res.Voided
			mu.Unlock()
		})
		// The lists cover codes 0..37 (8 lists of 10 starting at 0, 4, …, 28).
		if voided != 38 {
			t.Fatalf("voided %d codes in all, want 38 (each code of the lists once)", voided)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 2, domain.CardVoid: 38})
	})

	t.Run("lock frozen reports the flag, refuses an unknown product, and serialises", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		if frozen, err := l.Products().LockFrozen(t.Context(), p); err != nil || frozen {
			t.Fatalf("LockFrozen of a product on sale = %v, %v", frozen, err)
		}
		if err := l.Products().SetFrozen(t.Context(), p, true, "leak"); err != nil {
			t.Fatal(err)
		}
		if frozen, err := l.Products().LockFrozen(t.Context(), p); err != nil || !frozen {
			t.Fatalf("LockFrozen of a frozen product = %v, %v", frozen, err)
		}
		if _, err := l.Products().LockFrozen(t.Context(), NewProductID()); !errors.Is(err, domain.ErrProductNotFound) {
			t.Fatalf("LockFrozen of an unknown product: err = %v, want ErrProductNotFound", err)
		}
		// Two transactions that take the lock never overlap: each notes when it is inside.
		var inside sync.Mutex
		in, overlap := 0, false
		parallel(4, func(int) {
			err := l.Atomically(t.Context(), func(tx domain.Store) error {
				if _, err := tx.Products().LockFrozen(t.Context(), p); err != nil {
					return err
				}
				inside.Lock()
				in++
				overlap = overlap || in > 1
				inside.Unlock()
				time.Sleep(20 * time.Millisecond)
				inside.Lock()
				in--
				inside.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("Atomically: %v", err)
			}
		})
		if overlap {
			t.Fatal("two transactions held the product's lock at once")
		}
	})
}
