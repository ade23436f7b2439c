package porttest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"cardshop/domain"
)

// runCards checks the card pool: Import reports duplicates in a batch, across batches and
// across products (a code is in one product only, also under concurrent imports); Allocate
// sells distinct sellable codes to an order or refuses and changes nothing; Reclaim returns
// codes to the pool (RECYCLED) or keeps them out (VOID); concurrent allocations in
// transactions never sell a code twice.
func runCards(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("import reports duplicates in the batch and across batches", func(t *testing.T) {
		l := newLedger(t)
		p, q := createProduct(t, l).ID(), createProduct(t, l).ID()
		c := newCodes(t, 4)
		importCodes(t, l, p, []domain.CardCode{c[0], c[1], c[2], c[0]}, domain.ImportResult{Added: 3, Duplicates: 1})
		importCodes(t, l, p, []domain.CardCode{c[1], c[3]}, domain.ImportResult{Added: 1, Duplicates: 1})
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 4})
		importCodes(t, l, q, newCodes(t, 1), domain.ImportResult{Added: 1})
		wantCounts(t, l, q, domain.CardCounts{domain.CardUnsold: 1})
	})

	t.Run("a code is unique across the whole pool", func(t *testing.T) {
		l := newLedger(t)
		p, q := createProduct(t, l).ID(), createProduct(t, l).ID()
		c := newCodes(t, 3)
		importCodes(t, l, p, c[:1], domain.ImportResult{Added: 1})
		// Another product's code is refused, whatever else the batch holds; the product's own
		// codes and repeats stay duplicates.
		importCodes(t, l, q, []domain.CardCode{c[1], c[0], c[1], c[2], c[0]}, domain.ImportResult{Added: 2, Duplicates: 1, InPool: 2,
			Outcomes: []domain.ImportOutcome{domain.ImportAdded, domain.ImportInPool, domain.ImportDuplicate, domain.ImportAdded, domain.ImportInPool}})
		importCodes(t, l, p, []domain.CardCode{c[0], c[2]}, domain.ImportResult{Duplicates: 1, InPool: 1,
			Outcomes: []domain.ImportOutcome{domain.ImportDuplicate, domain.ImportInPool}})
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 1})
		wantCounts(t, l, q, domain.CardCounts{domain.CardUnsold: 2})
		// A code sold (or voided) is still in the pool: it is never sold again through
		// another product.
		no := newOrderNo()
		allocate(t, l, p, no, 1)
		reclaim(t, l, no, domain.CardVoid, 1)
		importCodes(t, l, q, c[:1], domain.ImportResult{InPool: 1})
		wantCounts(t, l, q, domain.CardCounts{domain.CardUnsold: 2})
	})

	t.Run("race: concurrent imports of one code into several products add it once", func(t *testing.T) {
		l := newLedger(t)
		const products = 6
		shared := newCodes(t, 20)
		var wg sync.WaitGroup
		results := make([]domain.ImportResult, products)
		errs := make([]error, products)
		ids := make([]domain.ProductID, products)
		for i := range ids {
			ids[i] = createProduct(t, l).ID()
		}
		for i := range products {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each product also gets codes of its own, and the shared ones in another order.
				batch := append(newCodes(t, 5), shared...)
				rand.Shuffle(len(batch), func(a, b int) { batch[a], batch[b] = batch[b], batch[a] })
				errs[i] = l.Atomically(t.Context(), func(tx domain.Store) error {
					var err error
					results[i], err = tx.Cards().Import(t.Context(), ids[i], batch, 1)
					return err
				})
			}()
		}
		wg.Wait()
		added, inPool := 0, 0
		for i := range products {
			if errs[i] != nil {
				t.Fatalf("import %d: %v", i, errs[i])
			}
			r := results[i]
			if r.Duplicates != 0 || r.Added+r.InPool != 25 || r.Added < 5 {
				t.Fatalf("import %d = %+v", i, r)
			}
			added += r.Added
			inPool += r.InPool
			wantCounts(t, l, ids[i], domain.CardCounts{domain.CardUnsold: int64(r.Added)})
		}
		if added != 5*products+len(shared) || inPool != len(shared)*(products-1) {
			t.Fatalf("added %d, in another pool %d: want %d and %d", added, inPool, 5*products+len(shared), len(shared)*(products-1))
		}
	})

	t.Run("allocate marks qty sellable codes sold to the order", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 5)
		importCodes(t, l, p, codes, domain.ImportResult{Added: 5})
		no := newOrderNo()
		got := allocate(t, l, p, no, 3)
		checkAllocation(t, got, p, no, 3, codes)
		cards, err := l.Cards().Cards(t.Context(), no)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(got)
		slices.SortFunc(sorted, func(a, b domain.Card) int { return cmpInt(a.ID, b.ID) })
		if !sameCards(cards, sorted) {
			t.Fatalf("Cards(order) = %v, want the allocated cards by id %v", ids(cards), ids(sorted))
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 2, domain.CardSold: 3})
		if cards, err := l.Cards().Cards(t.Context(), newOrderNo()); err != nil || len(cards) != 0 {
			t.Fatalf("Cards(unknown order) = %v, %v; want none", ids(cards), err)
		}
	})

	t.Run("insufficient pool is refused and changes nothing", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		importCodes(t, l, p, newCodes(t, 2), domain.ImportResult{Added: 2})
		no := newOrderNo()
		if _, err := l.Cards().Allocate(t.Context(), p, no, 3); !errors.Is(err, domain.ErrInsufficientCards) {
			t.Fatalf("Allocate 3 of 2: err = %v, want ErrInsufficientCards", err)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 2})
		if cards, _ := l.Cards().Cards(t.Context(), no); len(cards) != 0 {
			t.Fatalf("refused allocation left cards %v on the order", ids(cards))
		}
		allocate(t, l, p, no, 2)
		if _, err := l.Cards().Allocate(t.Context(), NewProductID(), newOrderNo(), 1); !errors.Is(err, domain.ErrInsufficientCards) {
			t.Fatalf("Allocate from an empty pool: err = %v, want ErrInsufficientCards", err)
		}
	})

	t.Run("reclaim to RECYCLED returns the codes to the pool", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		codes := newCodes(t, 3)
		importCodes(t, l, p, codes, domain.ImportResult{Added: 3})
		first := newOrderNo()
		allocate(t, l, p, first, 3)
		reclaim(t, l, first, domain.CardRecycled, 3)
		reclaim(t, l, first, domain.CardRecycled, 0)
		wantCounts(t, l, p, domain.CardCounts{domain.CardRecycled: 3})
		if cards, _ := l.Cards().Cards(t.Context(), first); len(cards) != 0 {
			t.Fatalf("Cards of a reclaimed order = %v, want none", ids(cards))
		}
		second := newOrderNo()
		checkAllocation(t, allocate(t, l, p, second, 3), p, second, 3, codes)
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 3})
	})

	t.Run("reclaim to VOID keeps the codes out of the pool", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		importCodes(t, l, p, newCodes(t, 3), domain.ImportResult{Added: 3})
		first := newOrderNo()
		allocate(t, l, p, first, 2)
		reclaim(t, l, first, domain.CardVoid, 2)
		wantCounts(t, l, p, domain.CardCounts{domain.CardUnsold: 1, domain.CardVoid: 2})
		if _, err := l.Cards().Allocate(t.Context(), p, newOrderNo(), 2); !errors.Is(err, domain.ErrInsufficientCards) {
			t.Fatalf("Allocate of voided codes: err = %v, want ErrInsufficientCards", err)
		}
		allocate(t, l, p, newOrderNo(), 1)
	})

	t.Run("reclaim refuses other target states", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		importCodes(t, l, p, newCodes(t, 1), domain.ImportResult{Added: 1})
		no := newOrderNo()
		allocate(t, l, p, no, 1)
		for _, to := range []domain.CardStatus{domain.CardUnsold, domain.CardSold, 0} {
			if _, err := l.Cards().Reclaim(t.Context(), no, to); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Reclaim to %s: err = %v, want ErrInvalidInput", to, err)
			}
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: 1})
	})

	t.Run("race: 40 allocations in transactions never sell a code twice", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		importCodes(t, l, p, newCodes(t, 50), domain.ImportResult{Added: 50})
		var mu sync.Mutex
		soldTo := map[int64]domain.OrderNo{}
		codes := map[string]bool{}
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
				if !errors.Is(err, domain.ErrInsufficientCards) {
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
			for _, c := range got {
				if prev, dup := soldTo[c.ID]; dup {
					t.Errorf("card %d sold to %s and %s", c.ID, prev, no)
				}
				if codes[c.Code.Reveal()] {
					t.Errorf("code of card %d sold twice", c.ID)
				}
				soldTo[c.ID], codes[c.Code.Reveal()] = no, true
			}
		})
		if total == 0 || total > 50 {
			t.Fatalf("allocated %d codes from a pool of 50", total)
		}
		wantCounts(t, l, p, domain.CardCounts{domain.CardSold: int64(total), domain.CardUnsold: int64(50 - total)})
	})
}

func reclaim(t *testing.T, l domain.Store, no domain.OrderNo, to domain.CardStatus, want int) {
	t.Helper()
	got, err := l.Cards().Reclaim(t.Context(), no, to)
	if err != nil || got != want {
		t.Fatalf("Reclaim to %s = %d, %v; want %d", to, got, err, want)
	}
}

// checkAllocation checks cards are qty distinct codes from pool, SOLD to no.
func checkAllocation(t *testing.T, cards []domain.Card, p domain.ProductID, no domain.OrderNo, qty int, pool []domain.CardCode) {
	t.Helper()
	if len(cards) != qty {
		t.Fatalf("Allocate returned %d cards, want %d", len(cards), qty)
	}
	seen := map[int64]bool{}
	for _, c := range cards {
		if seen[c.ID] || c.ID <= 0 || c.ProductID != p || c.Status != domain.CardSold || c.OrderNo != no ||
			!slices.ContainsFunc(pool, func(x domain.CardCode) bool { return x.Reveal() == c.Code.Reveal() }) {
			t.Fatalf("allocated card %d (product %d, %s, order %s) is not a distinct SOLD code of the pool for %s",
				c.ID, c.ProductID, c.Status, c.OrderNo, no)
		}
		seen[c.ID] = true
	}
}

func sameCards(a, b []domain.Card) bool {
	return slices.EqualFunc(a, b, func(x, y domain.Card) bool {
		return x.ID == y.ID && x.Code.Reveal() == y.Code.Reveal() && x.Status == y.Status &&
			x.OrderNo == y.OrderNo && x.ProductID == y.ProductID
	})
}
