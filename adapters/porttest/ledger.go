package porttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// RunLedger checks a domain.Ledger (products, orders, cards, flow, outbox and transactions)
// against the ports' contracts. newLedger returns the ledger under test; it is called once per
// case and may return the same shared database every time.
//
// The outbox cases assert exact changes of the global Backlog, so nothing else may write to
// the same database's outbox while they run.
func RunLedger(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("products", func(t *testing.T) { runProducts(t, newLedger) })
	t.Run("orders", func(t *testing.T) { runOrders(t, newLedger) })
	t.Run("cards", func(t *testing.T) { runCards(t, newLedger) })
	t.Run("flows", func(t *testing.T) { runFlows(t, newLedger) })
	t.Run("outbox", func(t *testing.T) { runOutbox(t, newLedger) })
	t.Run("atomically", func(t *testing.T) { runAtomically(t, newLedger) })
	t.Run("snapshot", func(t *testing.T) { runSnapshot(t, newLedger) })
}

func runProducts(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("create assigns an id to a zero id", func(t *testing.T) {
		l := newLedger(t)
		p, err := domain.NewProduct(0, "porttest assigned", 250, 5, now())
		if err != nil {
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
			if got := productRecord(all[i]); got != productRecord(want) {
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
}

func runOrders(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("insert then read by number and by key", func(t *testing.T) {
		l := newLedger(t)
		o := newOrder(t, createProduct(t, l), 2, now())
		insertOrder(t, l, o)
		wantOrder(t, l, o)
		got, err := l.Orders().OrderByKey(t.Context(), o.Buyer(), o.IdempotencyKey())
		if err != nil {
			t.Fatal(err)
		}
		sameOrder(t, got, o)
	})

	t.Run("unknown number and key are not found", func(t *testing.T) {
		l := newLedger(t)
		if _, err := l.Orders().Order(t.Context(), newOrderNo()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("Order(unknown): err = %v, want ErrOrderNotFound", err)
		}
		if _, err := l.Orders().OrderByKey(t.Context(), newBuyer(), newKey()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("OrderByKey(unknown): err = %v, want ErrOrderNotFound", err)
		}
		// A key belongs to its buyer: another buyer's key finds nothing.
		o := newOrder(t, createProduct(t, l), 1, now())
		insertOrder(t, l, o)
		if _, err := l.Orders().OrderByKey(t.Context(), newBuyer(), o.IdempotencyKey()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("OrderByKey(other buyer): err = %v, want ErrOrderNotFound", err)
		}
	})

	t.Run("duplicate number is refused", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		o := newOrder(t, p, 1, now())
		insertOrder(t, l, o)
		dup, err := domain.NewOrder(o.No(), newBuyer(), p, 3, newKey(), now(), 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Orders().Insert(t.Context(), dup); !errors.Is(err, domain.ErrDuplicateOrder) {
			t.Fatalf("Insert with a taken number: err = %v, want ErrDuplicateOrder", err)
		}
		wantOrder(t, l, o)
	})

	t.Run("duplicate buyer key is refused, another buyer's same key is not", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		o := newOrder(t, p, 1, now())
		insertOrder(t, l, o)
		dup, _ := domain.NewOrder(newOrderNo(), o.Buyer(), p, 1, o.IdempotencyKey(), now(), 15*time.Minute)
		if err := l.Orders().Insert(t.Context(), dup); !errors.Is(err, domain.ErrDuplicateIdempotencyKey) {
			t.Fatalf("Insert with the buyer's taken key: err = %v, want ErrDuplicateIdempotencyKey", err)
		}
		if _, err := l.Orders().Order(t.Context(), dup.No()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("refused order is stored (err = %v)", err)
		}
		other, _ := domain.NewOrder(newOrderNo(), newBuyer(), p, 1, o.IdempotencyKey(), now(), 15*time.Minute)
		insertOrder(t, l, other)
	})

	t.Run("transition wins once and only from the stored status", func(t *testing.T) {
		l := newLedger(t)
		o := newOrder(t, createProduct(t, l), 2, now())
		insertOrder(t, l, o)
		paid := o
		if err := paid.MarkPaid(now().Add(time.Minute), o.Amount(), "pay-"+string(o.No())); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false} {
			won, err := l.Orders().Transition(t.Context(), paid, domain.StatusPending)
			if err != nil || won != want {
				t.Fatalf("Transition PENDING->PAID #%d = %v, %v; want %v, nil", i+1, won, err, want)
			}
		}
		wantOrder(t, l, paid)
		failed := o
		if err := failed.Fail(now().Add(time.Minute), "declined"); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), failed, domain.StatusPending); err != nil || won {
			t.Fatalf("Transition from a status the order left = %v, %v; want false, nil", won, err)
		}
		wantOrder(t, l, paid)
		stranger := newOrder(t, createProduct(t, l), 1, now())
		if _, err := l.Orders().Transition(t.Context(), stranger, domain.StatusPending); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("Transition of an unknown order: err = %v, want ErrOrderNotFound", err)
		}
	})

	t.Run("mark revealed: only a PAID order, the first time; transitions keep it", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		o := newOrder(t, createProduct(t, l), 2, at)
		insertOrder(t, l, o)
		if _, err := l.Orders().MarkRevealed(t.Context(), newOrderNo(), at); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("MarkRevealed of an unknown order: err = %v, want ErrOrderNotFound", err)
		}
		if set, err := l.Orders().MarkRevealed(t.Context(), o.No(), at); err != nil || set {
			t.Fatalf("MarkRevealed of a PENDING order = %v, %v; want false, nil", set, err)
		}
		wantOrder(t, l, o)
		paid := o
		if err := paid.MarkPaid(at.Add(time.Minute), o.Amount(), "pay-"+string(o.No())); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), paid, domain.StatusPending); err != nil || !won {
			t.Fatalf("Transition PENDING->PAID = %v, %v", won, err)
		}
		first, second := at.Add(2*time.Minute), at.Add(3*time.Minute)
		for i, want := range []bool{true, false} {
			if set, err := l.Orders().MarkRevealed(t.Context(), o.No(), []time.Time{first, second}[i]); err != nil || set != want {
				t.Fatalf("MarkRevealed #%d = %v, %v; want %v, nil", i+1, set, err, want)
			}
		}
		revealed := paid
		if err := revealed.MarkRevealed(first); err != nil {
			t.Fatal(err)
		}
		wantOrder(t, l, revealed)

		// A refund decided on the order as read before the reveal loses.
		stale := paid
		if err := stale.Refund(at.Add(4*time.Minute), "recycle"); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), stale, domain.StatusPaid); err != nil || won {
			t.Fatalf("Transition of an order read before its reveal = %v, %v; want false, nil", won, err)
		}
		wantOrder(t, l, revealed)
		// One decided on the revealed order wins, and a RevealedAt it carries is not written:
		// the stored one stays.
		rec := revealed.Record()
		rec.RevealedAt = second
		refunded := domain.RehydrateOrder(rec)
		if err := refunded.Refund(at.Add(4*time.Minute), "void"); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), refunded, domain.StatusPaid); err != nil || !won {
			t.Fatalf("Transition of the revealed order = %v, %v; want true, nil", won, err)
		}
		rec = refunded.Record()
		rec.RevealedAt = first
		wantOrder(t, l, domain.RehydrateOrder(rec))
		if set, err := l.Orders().MarkRevealed(t.Context(), o.No(), second); err != nil || set {
			t.Fatalf("MarkRevealed of a REFUNDED order = %v, %v; want false, nil", set, err)
		}
	})

	t.Run("race: reveals and refunds of one order at once: recycled and never shown, or shown and voided", func(t *testing.T) {
		l := newLedger(t)
		for round := range 10 {
			raceRevealAndRefund(t, l, round)
		}
	})

	t.Run("expired lists due PENDING orders oldest first, up to limit", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		// A random window in the past that nothing else uses: orders created now expire now +
		// 15 min, and this window stays inside any TIMESTAMP column's range.
		base := time.Date(2001+rand.IntN(19), time.Month(1+rand.IntN(12)), 1+rand.IntN(28),
			rand.IntN(24), rand.IntN(60), 0, 0, time.UTC)
		const timeout = 15 * time.Minute
		var due []domain.Order // expected, oldest expiry first
		var all []domain.Order
		for _, offset := range []time.Duration{3, 0, 2, 1, 4} { // expiry = base+offset minutes
			o := newOrder(t, p, 1, base.Add(offset*time.Minute-timeout))
			insertOrder(t, l, o)
			all = append(all, o)
		}
		due = []domain.Order{all[1], all[3], all[2], all[0]} // expiry at or before base+3m
		cutoff := base.Add(3 * time.Minute)
		// Orders that are due but not PENDING are never listed.
		closed := newOrder(t, p, 1, base.Add(-timeout-time.Minute))
		insertOrder(t, l, closed)
		all = append(all, closed)
		byClose := closed
		if err := byClose.Close(base); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), byClose, domain.StatusPending); err != nil || !won {
			t.Fatalf("Transition to CLOSED = %v, %v", won, err)
		}
		t.Cleanup(func() { closeOrders(l, all) })

		got, err := l.Orders().Expired(t.Context(), cutoff, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		checkExpired(t, got, cutoff)
		var mine []domain.OrderNo
		for _, o := range got {
			if slices.ContainsFunc(all, func(x domain.Order) bool { return x.No() == o.No() }) {
				mine = append(mine, o.No())
			}
		}
		var want []domain.OrderNo
		for _, o := range due {
			want = append(want, o.No())
		}
		if !slices.Equal(mine, want) {
			t.Fatalf("Expired lists this test's orders %v, want %v (oldest expiry first)", mine, want)
		}

		limited, err := l.Orders().Expired(t.Context(), cutoff, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(limited) != 2 {
			t.Fatalf("Expired with limit 2 returned %d orders, want 2", len(limited))
		}
		checkExpired(t, limited, cutoff)
	})

	t.Run("totals sum orders and qty by status", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		var paidOne domain.Order
		for i, qty := range []int{1, 2, 3} {
			o := newOrder(t, p, qty, now())
			insertOrder(t, l, o)
			if i == 2 {
				paidOne = o
			}
		}
		paid := paidOne
		if err := paid.MarkPaid(now(), paid.Amount(), "pay-1"); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), paid, domain.StatusPending); err != nil || !won {
			t.Fatalf("Transition = %v, %v", won, err)
		}
		got, err := l.Orders().Totals(t.Context(), p.ID())
		if err != nil {
			t.Fatal(err)
		}
		want := map[domain.OrderStatus]domain.StatusTotal{
			domain.StatusPending: {Orders: 2, Qty: 3},
			domain.StatusPaid:    {Orders: 1, Qty: 3},
		}
		for _, st := range domain.AllOrderStatuses {
			if got[st] != want[st] {
				t.Errorf("Totals[%s] = %+v, want %+v", st, got[st], want[st])
			}
		}
	})

	t.Run("existing tells written orders from unknown numbers, in any status", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		pending, closed := newOrder(t, p, 1, now()), newOrder(t, p, 2, now())
		insertOrder(t, l, pending)
		insertOrder(t, l, closed)
		byClose := closed
		if err := byClose.Close(closed.ExpiresAt()); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), byClose, domain.StatusPending); err != nil || !won {
			t.Fatalf("Transition to CLOSED = %v, %v", won, err)
		}
		t.Cleanup(func() { closeOrders(l, []domain.Order{pending}) })
		unknown := newOrderNo()
		asked := []domain.OrderNo{pending.No(), unknown, closed.No(), pending.No()}
		got, err := l.Orders().Existing(t.Context(), asked)
		if err != nil {
			t.Fatal(err)
		}
		want := map[domain.OrderNo]bool{pending.No(): true, closed.No(): true, unknown: false}
		if len(got) != len(want) {
			t.Fatalf("Existing = %v, want %v", got, want)
		}
		for no, w := range want {
			if v, ok := got[no]; !ok || v != w {
				t.Fatalf("Existing = %v, want %v", got, want)
			}
		}
		if none, err := l.Orders().Existing(t.Context(), nil); err != nil || len(none) != 0 {
			t.Fatalf("Existing(nothing) = %v, %v; want an empty map", none, err)
		}
		// Many numbers still make one answer.
		many := make([]domain.OrderNo, 700)
		for i := range many {
			many[i] = newOrderNo()
		}
		many[350] = closed.No()
		got, err = l.Orders().Existing(t.Context(), many)
		if err != nil || len(got) != len(many) || !got[closed.No()] || got[many[0]] {
			t.Fatalf("Existing of %d numbers = %d answers (%v), closed %v", len(many), len(got), err, got[closed.No()])
		}
	})

	t.Run("race: 30 transitions of one order, exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		o := newOrder(t, createProduct(t, l), 1, at)
		insertOrder(t, l, o)
		wins := make([]bool, 30)
		targets := make([]domain.Order, 30)
		for i := range targets {
			next := o
			var err error
			if i%2 == 0 {
				err = next.MarkPaid(at.Add(time.Minute), o.Amount(), fmt.Sprintf("pay-%d", i))
			} else {
				err = next.Close(o.ExpiresAt())
			}
			if err != nil {
				t.Fatal(err)
			}
			targets[i] = next
		}
		parallel(30, func(i int) {
			won, err := l.Orders().Transition(t.Context(), targets[i], domain.StatusPending)
			if err != nil {
				t.Error(err)
			}
			wins[i] = won
		})
		winner := -1
		for i, won := range wins {
			if won {
				if winner >= 0 {
					t.Fatalf("transitions %d and %d both won", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no transition won")
		}
		wantOrder(t, l, targets[winner])
	})
}

// raceRevealAndRefund pays an order of 2 codes, then runs 4 reveals and 4 refunds of it at
// once, each as the service does it with the ports alone. A reveal records MarkRevealed and
// then reads the codes, showing them only if the order is still PAID and revealed; a refund
// reads the order, voids the codes if it is revealed and recycles them otherwise, and
// decides again when its Transition loses. Exactly one refund does the work; the codes were
// recycled only if no reveal was recorded and none shown, and voided otherwise.
func raceRevealAndRefund(t *testing.T, l domain.Ledger, round int) {
	t.Helper()
	ctx := t.Context()
	at := now()
	p := createProduct(t, l)
	importCodes(t, l, p.ID(), newCodes(t, 2), domain.ImportResult{Added: 2})
	o := newOrder(t, p, 2, at)
	insertOrder(t, l, o)
	paid := o
	if err := paid.MarkPaid(at, o.Amount(), "pay-"+string(o.No())); err != nil {
		t.Fatal(err)
	}
	err := l.Atomically(ctx, func(tx domain.Store) error {
		if won, err := tx.Orders().Transition(ctx, paid, domain.StatusPending); err != nil || !won {
			return fmt.Errorf("pay: %v, %w", won, err)
		}
		_, err := tx.Cards().Allocate(ctx, p.ID(), o.No(), 2)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	const n = 8
	shown := make([]int, n)
	reclaimed := make([]domain.CardStatus, n)
	parallel(n, func(i int) {
		if i%2 == 0 {
			shown[i] = revealForRace(t, l, o.No(), at)
			return
		}
		reclaimed[i] = refundForRace(t, l, o.No(), at)
	})
	if t.Failed() {
		return
	}
	var seen int
	var to []domain.CardStatus
	for i := range n {
		seen += shown[i]
		if reclaimed[i] != 0 {
			to = append(to, reclaimed[i])
		}
	}
	stored, err := l.Orders().Order(ctx, o.No())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(to) != 1 || stored.Status() != domain.StatusRefunded:
		t.Fatalf("round %d: %d refunds did the work (%v), order %s; want exactly one, REFUNDED", round, len(to), to, stored.Status())
	case to[0] == domain.CardRecycled && (seen > 0 || stored.Revealed()):
		t.Fatalf("round %d: codes recycled although %d were shown (revealed at %v)", round, seen, stored.RevealedAt())
	case to[0] == domain.CardVoid && !stored.Revealed():
		t.Fatalf("round %d: codes voided by a default refund of an order never revealed", round)
	}
	wantCounts(t, l, p.ID(), domain.CardCounts{to[0]: 2})
}

// revealForRace is the service's reveal: record it, then read the codes if the order is
// still PAID and revealed. It returns how many codes it showed.
func revealForRace(t *testing.T, l domain.Ledger, no domain.OrderNo, at time.Time) int {
	ctx := t.Context()
	if _, err := l.Orders().MarkRevealed(ctx, no, at); err != nil {
		t.Errorf("MarkRevealed: %v", err)
		return 0
	}
	o, err := l.Orders().Order(ctx, no)
	if err != nil {
		t.Errorf("Order: %v", err)
		return 0
	}
	if o.Status() != domain.StatusPaid {
		return 0
	}
	if !o.Revealed() {
		t.Errorf("a PAID order is not revealed after MarkRevealed")
		return 0
	}
	cards, err := l.Cards().Cards(ctx, no)
	if err != nil {
		t.Errorf("Cards: %v", err)
	}
	return len(cards)
}

// refundForRace is the service's default refund: void if revealed, recycle if not, decided
// again when the Transition loses. It returns where the codes went, or 0 if another refund
// did the work.
func refundForRace(t *testing.T, l domain.Ledger, no domain.OrderNo, at time.Time) domain.CardStatus {
	ctx := t.Context()
	for range 20 {
		o, err := l.Orders().Order(ctx, no)
		if err != nil {
			t.Errorf("Order: %v", err)
			return 0
		}
		if o.Status() == domain.StatusRefunded {
			return 0
		}
		refunded := o
		if err := refunded.Refund(at, "race"); err != nil {
			t.Errorf("Refund: %v", err)
			return 0
		}
		to := domain.CardRecycled
		if o.Revealed() {
			to = domain.CardVoid
		}
		won := false
		err = l.Atomically(ctx, func(tx domain.Store) error {
			var err error
			if won, err = tx.Orders().Transition(ctx, refunded, domain.StatusPaid); err != nil || !won {
				return err
			}
			n, err := tx.Cards().Reclaim(ctx, no, to)
			if err == nil && n != 2 {
				err = fmt.Errorf("reclaimed %d codes, want 2", n)
			}
			return err
		})
		if err != nil {
			t.Errorf("refund: %v", err)
			return 0
		}
		if won {
			return to
		}
	}
	t.Errorf("refund lost 20 times in a row")
	return 0
}

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
					results[i], err = tx.Cards().Import(t.Context(), ids[i], batch)
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

func runFlows(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("append refuses a duplicate (ref, type) and lists entries oldest first", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		ref := string(newOrderNo())
		reserveRow := domain.FlowEntry{ProductID: p, Ref: ref, Type: domain.FlowReserve, Qty: 2, At: now()}
		payRow := domain.FlowEntry{ProductID: p, Ref: ref, Type: domain.FlowPay, Qty: 2, At: now().Add(time.Second)}
		appendFlow(t, l, reserveRow)
		appendFlow(t, l, payRow)
		dup := reserveRow
		dup.Qty = 5
		if err := l.Flows().Append(t.Context(), dup); !errors.Is(err, domain.ErrDuplicateFlow) {
			t.Fatalf("Append of a taken (ref, type): err = %v, want ErrDuplicateFlow", err)
		}
		got, err := l.Flows().Entries(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		want := []domain.FlowEntry{reserveRow, payRow}
		if len(got) != len(want) {
			t.Fatalf("Entries = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].ID <= 0 || (i > 0 && got[i].ID <= got[i-1].ID) {
				t.Fatalf("Entries ids %d, %d: want positive and increasing", got[0].ID, got[len(got)-1].ID)
			}
			g, w := got[i], want[i]
			g.ID, g.At, w.At = 0, g.At.UTC(), w.At.UTC()
			if g != w {
				t.Fatalf("Entries[%d] = %+v, want %+v", i, g, w)
			}
		}
		if got, err := l.Flows().Entries(t.Context(), string(newOrderNo())); err != nil || len(got) != 0 {
			t.Fatalf("Entries(unknown ref) = %+v, %v; want none", got, err)
		}
	})

	t.Run("totals sum the product's flow by type", func(t *testing.T) {
		l := newLedger(t)
		p, other := createProduct(t, l).ID(), createProduct(t, l).ID()
		batch := "batch-" + string(newOrderNo())
		appendFlow(t, l, domain.FlowEntry{ProductID: p, Ref: batch, Type: domain.FlowStockIn, Qty: 10, At: now()})
		for _, qty := range []int64{1, 2} {
			appendFlow(t, l, domain.FlowEntry{ProductID: p, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: qty, At: now()})
		}
		appendFlow(t, l, domain.FlowEntry{ProductID: other, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: 7, At: now()})
		got, err := l.Flows().Totals(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		want := domain.FlowTotals{domain.FlowStockIn: 10, domain.FlowReserve: 3}
		for typ := domain.FlowType(1); typ.Valid(); typ++ {
			if got[typ] != want[typ] {
				t.Errorf("Totals[%s] = %d, want %d", typ, got[typ], want[typ])
			}
		}
	})
}

func runOutbox(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("add, pending, mark failed, mark sent, backlog", func(t *testing.T) {
		l := newLedger(t)
		before := backlog(t, l)
		key := string(newOrderNo())
		payloads := [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`)}
		for _, pl := range payloads {
			m := domain.OutboxMessage{Topic: domain.TopicDelivered, Key: key, Payload: pl, At: now()}
			if err := l.Outbox().Add(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		payloads[0][1] = 'X' // the store kept its own copy
		if got := backlog(t, l); got != before+3 {
			t.Fatalf("Backlog = %d after 3 adds, want %d", got, before+3)
		}
		mine := pendingWithKey(t, l, key)
		if len(mine) != 3 {
			t.Fatalf("Pending holds %d of this test's messages, want 3", len(mine))
		}
		for i, m := range mine {
			want := fmt.Sprintf(`{"n":%d}`, i+1)
			if m.ID <= 0 || (i > 0 && m.ID <= mine[i-1].ID) || string(m.Payload) != want ||
				m.Topic != domain.TopicDelivered || m.Attempts != 0 {
				t.Fatalf("Pending[%d] = %+v (payload %s), want id increasing, payload %s, 0 attempts", i, m, m.Payload, want)
			}
		}
		if one, err := l.Outbox().Pending(t.Context(), farFuture(), 1); err != nil || len(one) != 1 {
			t.Fatalf("Pending(1) = %d messages, %v; want 1", len(one), err)
		}

		first, second := mine[0].ID, mine[1].ID
		for range 2 {
			if err := l.Outbox().MarkFailed(t.Context(), second, mine[1].RetryAt); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Outbox().MarkSent(t.Context(), first, now()); err != nil {
			t.Fatal(err)
		}
		if err := l.Outbox().MarkSent(t.Context(), first, now()); err != nil {
			t.Fatalf("second MarkSent: %v", err)
		}
		if got := backlog(t, l); got != before+2 {
			t.Fatalf("Backlog = %d after one sent, want %d", got, before+2)
		}
		mine = pendingWithKey(t, l, key)
		if len(mine) != 2 || mine[0].ID != second || mine[0].Attempts != 2 {
			t.Fatalf("Pending after MarkSent/MarkFailed = %+v, want message %d with 2 attempts first", mine, second)
		}
		for _, m := range mine {
			if err := l.Outbox().MarkSent(t.Context(), m.ID, now()); err != nil {
				t.Fatal(err)
			}
		}
		if got := backlog(t, l); got != before {
			t.Fatalf("Backlog = %d after all sent, want %d", got, before)
		}
	})

	t.Run("a failed message waits for its retry time", func(t *testing.T) {
		l := newLedger(t)
		key := string(newOrderNo())
		at := now().Add(-time.Hour) // due long ago, so that it comes before other tests' messages
		for i := range 3 {
			m := domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte(fmt.Sprint(i)), At: at}
			if err := l.Outbox().Add(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		mine := pendingWithKey(t, l, key)
		if len(mine) != 3 || !mine[0].RetryAt.Equal(at) {
			t.Fatalf("Pending = %+v, want 3 messages due at their At %v", mine, at)
		}
		retry := at.Add(2 * time.Hour) // an hour from now
		if err := l.Outbox().MarkFailed(t.Context(), mine[0].ID, retry); err != nil {
			t.Fatal(err)
		}
		due := func(at time.Time) []int64 {
			t.Helper()
			all, err := l.Outbox().Pending(t.Context(), at, int(backlog(t, l))+100)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, m := range all {
				if m.Key == key {
					ids = append(ids, m.ID)
				}
			}
			return ids
		}
		if got := due(now()); !slices.Equal(got, []int64{mine[1].ID, mine[2].ID}) {
			t.Fatalf("due now = %v, want %v: the failed message waits for its retry time", got, []int64{mine[1].ID, mine[2].ID})
		}
		if got := due(retry); !slices.Equal(got, []int64{mine[1].ID, mine[2].ID, mine[0].ID}) {
			t.Fatalf("due at the retry time = %v, want the retried message last (latest due)", got)
		}
		// The retry time and the attempt count are kept.
		all := pendingWithKey(t, l, key)
		if last := all[len(all)-1]; last.ID != mine[0].ID || last.Attempts != 1 || !last.RetryAt.Equal(retry) {
			t.Fatalf("retried message = %+v, want 1 attempt, due %v", last, retry)
		}
		// A message added with its own RetryAt (a scheduled one) is due then, not at At.
		later := domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte("later"), At: at, RetryAt: retry}
		if err := l.Outbox().Add(t.Context(), later); err != nil {
			t.Fatal(err)
		}
		if got := due(now()); len(got) != 2 {
			t.Fatalf("due now after adding a message due in an hour = %v, want still 2", got)
		}
		for _, m := range pendingWithKey(t, l, key) {
			if err := l.Outbox().MarkSent(t.Context(), m.ID, now()); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("claim: one of several readers wins a message", func(t *testing.T) {
		l := newLedger(t)
		key := string(newOrderNo())
		at := now().Add(-time.Hour)
		if err := l.Outbox().Add(t.Context(), domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte("{}"), At: at}); err != nil {
			t.Fatal(err)
		}
		m := pendingWithKey(t, l, key)[0]
		lease := now().Add(time.Hour)
		wins := make([]bool, 8)
		parallel(len(wins), func(i int) {
			ok, err := l.Outbox().Claim(t.Context(), m.ID, m.RetryAt, lease)
			if err != nil {
				t.Error(err)
			}
			wins[i] = ok
		})
		if n := len(slices.DeleteFunc(slices.Clone(wins), func(w bool) bool { return !w })); n != 1 {
			t.Fatalf("%d of %d concurrent claims won, want 1", n, len(wins))
		}
		// Claimed: not due until the lease ends, then due again (its relay died).
		all, err := l.Outbox().Pending(t.Context(), now(), int(backlog(t, l))+100, domain.TopicWebhook)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all {
			if p.ID == m.ID {
				t.Fatal("a claimed message is due before its lease ends")
			}
		}
		if got := pendingWithKey(t, l, key); len(got) != 1 || !got[0].RetryAt.Equal(lease) || got[0].Attempts != 0 {
			t.Fatalf("claimed message = %+v, want due at the lease's end %v, 0 attempts", got, lease)
		}
		// A claim from a stale read loses; so does one of a sent message.
		if ok, err := l.Outbox().Claim(t.Context(), m.ID, m.RetryAt, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim from a stale read = %v, %v; want false", ok, err)
		}
		if err := l.Outbox().MarkSent(t.Context(), m.ID, now()); err != nil {
			t.Fatal(err)
		}
		if ok, err := l.Outbox().Claim(t.Context(), m.ID, lease, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim of a sent message = %v, %v; want false", ok, err)
		}
		if ok, err := l.Outbox().Claim(t.Context(), -1, lease, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim of an unknown message = %v, %v; want false, nil", ok, err)
		}
	})
}

// farFuture is a time every message is due by.
func farFuture() time.Time { return now().AddDate(100, 0, 0) }

var errRollback = errors.New("porttest: roll back")

// panicValue is what the panic case throws through Atomically.
type panicValue struct{ msg string }

func runAtomically(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	// writeAll writes to every repository inside tx and checks the transaction sees its writes.
	type world struct {
		pool    domain.ProductID // product whose codes the transaction allocates
		created domain.Product   // product the transaction creates
		order   domain.Order
		key     string // outbox key
	}
	setup := func(t *testing.T, l domain.Ledger) world {
		w := world{pool: createProduct(t, l).ID(), key: string(newOrderNo())}
		importCodes(t, l, w.pool, newCodes(t, 3), domain.ImportResult{Added: 3})
		w.created, _ = domain.NewProduct(NewProductID(), "porttest tx", 100, 5, now())
		pool, err := l.Products().Product(t.Context(), w.pool)
		if err != nil {
			t.Fatal(err)
		}
		w.order = newOrder(t, pool, 2, now())
		return w
	}
	writeAll := func(t *testing.T, tx domain.Store, w world) error {
		c := t.Context()
		if _, err := tx.Products().Create(c, w.created); err != nil {
			return err
		}
		if err := tx.Products().SetFrozen(c, w.pool, true, "tx"); err != nil {
			return err
		}
		if err := tx.Orders().Insert(c, w.order); err != nil {
			return err
		}
		if got, err := tx.Orders().Order(c, w.order.No()); err != nil || got.No() != w.order.No() {
			t.Errorf("a transaction does not read its own order: %v", err)
		}
		e := domain.FlowEntry{ProductID: w.pool, Ref: string(w.order.No()), Type: domain.FlowPay, Qty: 2, At: now()}
		if err := tx.Flows().Append(c, e); err != nil {
			return err
		}
		m := domain.OutboxMessage{Topic: domain.TopicDelivered, Key: w.key, Payload: []byte("{}"), At: now()}
		if err := tx.Outbox().Add(c, m); err != nil {
			return err
		}
		if _, err := tx.Cards().Allocate(c, w.pool, w.order.No(), 2); err != nil {
			return err
		}
		_, err := tx.Cards().Import(c, w.pool, newCodes(t, 1))
		return err
	}
	wantNothing := func(t *testing.T, l domain.Ledger, w world, before int64) {
		t.Helper()
		c := t.Context()
		if _, err := l.Products().Product(c, w.created.ID()); !errors.Is(err, domain.ErrProductNotFound) {
			t.Errorf("created product survived the rollback (err = %v)", err)
		}
		if p, err := l.Products().Product(c, w.pool); err != nil || p.Frozen() {
			t.Errorf("freeze survived the rollback (frozen %v, err %v)", p.Frozen(), err)
		}
		if _, err := l.Orders().Order(c, w.order.No()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("order survived the rollback (err = %v)", err)
		}
		if _, err := l.Orders().OrderByKey(c, w.order.Buyer(), w.order.IdempotencyKey()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("order's key survived the rollback (err = %v)", err)
		}
		if got, _ := l.Flows().Entries(c, string(w.order.No())); len(got) != 0 {
			t.Errorf("flow rows survived the rollback: %+v", got)
		}
		if got, _ := l.Flows().Totals(c, w.pool); got[domain.FlowPay] != 0 {
			t.Errorf("flow totals survived the rollback: %v", got)
		}
		if got := pendingWithKey(t, l, w.key); len(got) != 0 {
			t.Errorf("outbox message survived the rollback: %+v", got)
		}
		if got := backlog(t, l); got != before {
			t.Errorf("Backlog = %d after rollback, want %d", got, before)
		}
		if got, _ := l.Cards().Cards(c, w.order.No()); len(got) != 0 {
			t.Errorf("allocation survived the rollback: %v", ids(got))
		}
		wantCounts(t, l, w.pool, domain.CardCounts{domain.CardUnsold: 3})
		allocate(t, l, w.pool, newOrderNo(), 3) // the whole pool is sellable again
	}

	t.Run("an error rolls back every write", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := writeAll(t, tx, w); err != nil {
				t.Errorf("write in transaction: %v", err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantNothing(t, l, w, before)
	})

	t.Run("a repository error rolls back the earlier writes", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := writeAll(t, tx, w); err != nil {
				t.Errorf("write in transaction: %v", err)
			}
			return tx.Orders().Insert(t.Context(), w.order) // duplicate number
		})
		if !errors.Is(err, domain.ErrDuplicateOrder) {
			t.Fatalf("Atomically: err = %v, want ErrDuplicateOrder", err)
		}
		wantNothing(t, l, w, before)
	})

	t.Run("a panic rolls back and panics again", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		thrown := &panicValue{"boom"}
		func() {
			defer func() {
				if r := recover(); r != thrown {
					t.Fatalf("recovered %v, want the panic thrown in fn", r)
				}
			}()
			_ = l.Atomically(t.Context(), func(tx domain.Store) error {
				if err := writeAll(t, tx, w); err != nil {
					t.Errorf("write in transaction: %v", err)
				}
				panic(thrown)
			})
			t.Fatal("Atomically returned after fn panicked")
		}()
		wantNothing(t, l, w, before)
	})

	t.Run("success commits every write", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		if err := l.Atomically(t.Context(), func(tx domain.Store) error { return writeAll(t, tx, w) }); err != nil {
			t.Fatalf("Atomically: %v", err)
		}
		c := t.Context()
		wantProduct(t, l, w.created)
		if p, err := l.Products().Product(c, w.pool); err != nil || !p.Frozen() {
			t.Errorf("freeze not committed (frozen %v, err %v)", p.Frozen(), err)
		}
		wantOrder(t, l, w.order)
		if got, _ := l.Flows().Entries(c, string(w.order.No())); len(got) != 1 {
			t.Errorf("flow rows after commit: %+v, want 1", got)
		}
		if got := pendingWithKey(t, l, w.key); len(got) != 1 {
			t.Errorf("outbox messages after commit: %+v, want 1", got)
		}
		if got := backlog(t, l); got != before+1 {
			t.Errorf("Backlog = %d after commit, want %d", got, before+1)
		}
		if got, _ := l.Cards().Cards(c, w.order.No()); len(got) != 2 {
			t.Errorf("allocation after commit: %v, want 2 cards", ids(got))
		}
		wantCounts(t, l, w.pool, domain.CardCounts{domain.CardUnsold: 2, domain.CardSold: 2})
		for _, m := range pendingWithKey(t, l, w.key) {
			_ = l.Outbox().MarkSent(c, m.ID, now())
		}
	})
}

// --- helpers ---

func cmpInt[T ~int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func createProduct(t *testing.T, l domain.Store) domain.Product {
	t.Helper()
	p, err := domain.NewProduct(NewProductID(), "porttest product", 199, 10, now())
	if err != nil {
		t.Fatal(err)
	}
	created, err := l.Products().Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create product: %v", err)
	}
	if created.ID() != p.ID() {
		t.Fatalf("Create changed the explicit id %d to %d", p.ID(), created.ID())
	}
	return created
}

func productRecord(p domain.Product) domain.ProductRecord {
	r := p.Record()
	r.CreatedAt = r.CreatedAt.UTC()
	return r
}

func wantProduct(t *testing.T, l domain.Store, want domain.Product) {
	t.Helper()
	got, err := l.Products().Product(t.Context(), want.ID())
	if err != nil {
		t.Fatalf("Product(%d): %v", want.ID(), err)
	}
	if productRecord(got) != productRecord(want) {
		t.Fatalf("Product(%d) = %+v, want %+v", want.ID(), productRecord(got), productRecord(want))
	}
}

// newOrder is a new PENDING order of qty units of p placed at at, expiring 15 minutes later.
func newOrder(t *testing.T, p domain.Product, qty int, at time.Time) domain.Order {
	t.Helper()
	o, err := domain.NewOrder(newOrderNo(), newBuyer(), p, qty, newKey(), at, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func insertOrder(t *testing.T, l domain.Store, o domain.Order) {
	t.Helper()
	if err := l.Orders().Insert(t.Context(), o); err != nil {
		t.Fatalf("Insert order: %v", err)
	}
}

func orderRecord(o domain.Order) domain.OrderRecord {
	r := o.Record()
	for _, ts := range []*time.Time{&r.CreatedAt, &r.ExpiresAt, &r.PaidAt, &r.EndedAt, &r.UpdatedAt, &r.RevealedAt} {
		*ts = ts.UTC()
	}
	return r
}

func sameOrder(t *testing.T, got, want domain.Order) {
	t.Helper()
	if orderRecord(got) != orderRecord(want) {
		t.Fatalf("order = %+v, want %+v", orderRecord(got), orderRecord(want))
	}
}

func wantOrder(t *testing.T, l domain.Store, want domain.Order) {
	t.Helper()
	got, err := l.Orders().Order(t.Context(), want.No())
	if err != nil {
		t.Fatalf("Order(%s): %v", want.No(), err)
	}
	sameOrder(t, got, want)
}

// closeOrders moves the test's orders that are still PENDING to CLOSED, so a shared database
// does not keep offering them to Expired.
// It runs as a cleanup, after the test's context is cancelled.
func closeOrders(l domain.Store, orders []domain.Order) {
	c := context.Background()
	for _, o := range orders {
		stored, err := l.Orders().Order(c, o.No())
		if err != nil || stored.Status() != domain.StatusPending {
			continue
		}
		if err := stored.Close(stored.ExpiresAt()); err == nil {
			_, _ = l.Orders().Transition(c, stored, domain.StatusPending)
		}
	}
}

func checkExpired(t *testing.T, got []domain.Order, cutoff time.Time) {
	t.Helper()
	for i, o := range got {
		if o.Status() != domain.StatusPending || o.ExpiresAt().After(cutoff) {
			t.Fatalf("Expired lists %s (%s, expires %s), want only PENDING orders due by %s",
				o.No(), o.Status(), o.ExpiresAt(), cutoff)
		}
		if i > 0 && o.ExpiresAt().Before(got[i-1].ExpiresAt()) {
			t.Fatalf("Expired is not oldest first: %s after %s", o.ExpiresAt(), got[i-1].ExpiresAt())
		}
	}
}

func newCodes(t *testing.T, n int) []domain.CardCode {
	t.Helper()
	out := make([]domain.CardCode, n)
	for i := range out {
		c, err := domain.ParseCardCode(fmt.Sprintf("PT-%016X-%04d", rand.Uint64(), i))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

func importCodes(t *testing.T, l domain.Store, p domain.ProductID, codes []domain.CardCode, want domain.ImportResult) {
	t.Helper()
	got, err := l.Cards().Import(t.Context(), p, codes)
	if err != nil || got.Added != want.Added || got.Duplicates != want.Duplicates || got.InPool != want.InPool {
		t.Fatalf("Import = %+v, %v; want %+v", got, err, want)
	}
	if want.Outcomes != nil && !slices.Equal(got.Outcomes, want.Outcomes) {
		t.Fatalf("Import outcomes = %v, want %v", got.Outcomes, want.Outcomes)
	}
	n := map[domain.ImportOutcome]int{}
	for _, o := range got.Outcomes {
		n[o]++
	}
	if len(got.Outcomes) != len(codes) || n[domain.ImportAdded] != got.Added || n[domain.ImportDuplicate] != got.Duplicates ||
		n[domain.ImportInPool] != got.InPool {
		t.Fatalf("Import outcomes %v do not match the counts %+v of %d codes", got.Outcomes, got, len(codes))
	}
}

func allocate(t *testing.T, l domain.Store, p domain.ProductID, no domain.OrderNo, qty int) []domain.Card {
	t.Helper()
	got, err := l.Cards().Allocate(t.Context(), p, no, qty)
	if err != nil {
		t.Fatalf("Allocate(%d): %v", qty, err)
	}
	return got
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

func ids(cards []domain.Card) []int64 {
	out := make([]int64, len(cards))
	for i, c := range cards {
		out[i] = c.ID
	}
	return out
}

func wantCounts(t *testing.T, l domain.Store, p domain.ProductID, want domain.CardCounts) {
	t.Helper()
	got, err := l.Cards().Counts(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []domain.CardStatus{domain.CardUnsold, domain.CardSold, domain.CardRecycled, domain.CardVoid} {
		if got[st] != want[st] {
			t.Fatalf("Counts = %v, want %v", got, want)
		}
	}
}

func appendFlow(t *testing.T, l domain.Store, e domain.FlowEntry) {
	t.Helper()
	if err := l.Flows().Append(t.Context(), e); err != nil {
		t.Fatalf("Append %s flow: %v", e.Type, err)
	}
}

func backlog(t *testing.T, l domain.Store) int64 {
	t.Helper()
	n, err := l.Outbox().Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pendingWithKey returns the unsent messages with key, due or not, earliest due first. It asks
// for the whole backlog, because a shared outbox may hold older messages of other tests.
func pendingWithKey(t *testing.T, l domain.Store, key string) []domain.OutboxMessage {
	t.Helper()
	n := backlog(t, l)
	all, err := l.Outbox().Pending(t.Context(), farFuture(), int(n)+100)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.OutboxMessage
	for _, m := range all {
		if m.Key == key {
			m.Payload = bytes.Clone(m.Payload)
			out = append(out, m)
		}
	}
	return out
}
