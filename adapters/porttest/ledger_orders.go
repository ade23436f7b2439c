package porttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"cardshop/domain"
)

// runOrders checks the order repository: Insert and the reads by number and by buyer key,
// refused duplicates, Transition (it wins once, and only from the stored status, also under
// 30 concurrent attempts), MarkRevealed (and its race with refunds), Expired, Totals and
// Existing.
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

	t.Run("held by buyer sums PENDING and PAID, and REFUNDED that returned codes when asked", func(t *testing.T) {
		l := newLedger(t)
		p, other := createProduct(t, l), createProduct(t, l)
		var orders []domain.Order
		for _, qty := range []int{1, 2, 3, 4, 1} {
			o, err := domain.NewOrder(newOrderNo(), "porttest-holder", p, qty, newKey(), now(), 15*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			insertOrder(t, l, o)
			orders = append(orders, o)
		}
		insertOrder(t, l, newOrder(t, p, 5, now()))     // another buyer
		insertOrder(t, l, newOrder(t, other, 1, now())) // another product
		move := func(o domain.Order, from domain.OrderStatus, change func(*domain.Order) error) domain.Order {
			t.Helper()
			if err := change(&o); err != nil {
				t.Fatal(err)
			}
			if won, err := l.Orders().Transition(t.Context(), o, from); err != nil || !won {
				t.Fatalf("Transition = %v, %v", won, err)
			}
			return o
		}
		refund := func(o *domain.Order) error { return o.Refund(now(), "test") }
		move(orders[1], domain.StatusPending, func(o *domain.Order) error { return o.MarkPaid(now(), o.Amount(), "pay-h1") })
		// Refunded after it held codes: its refund returned them (a refund-restore row).
		held := move(orders[2], domain.StatusPending, func(o *domain.Order) error { return o.MarkPaid(now(), o.Amount(), "pay-h2") })
		move(held, domain.StatusPaid, refund)
		if err := l.Flows().Append(t.Context(), domain.FlowEntry{ProductID: p.ID(), Ref: string(held.No()),
			Type: domain.FlowRefundRestore, Qty: int64(held.Qty()), At: now()}); err != nil {
			t.Fatal(err)
		}
		move(orders[3], domain.StatusPending, func(o *domain.Order) error { return o.Close(o.ExpiresAt()) })
		// Refunded while UNFULFILLED: it never held codes, so it never counts.
		unfulfilled := move(orders[4], domain.StatusPending, func(o *domain.Order) error {
			return o.MarkUnfulfilled(now(), o.Amount(), "pay-h4", "pool short")
		})
		move(unfulfilled, domain.StatusUnfulfilled, refund)
		for _, withRefunded := range []bool{false, true} {
			got, err := l.Orders().HeldByBuyer(t.Context(), p.ID(), withRefunded)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(1 + 2) // PENDING 1 + PAID 2; the CLOSED 4 never counts
			if withRefunded {
				want += 3
			}
			if got["porttest-holder"] != want || len(got) != 2 {
				t.Fatalf("HeldByBuyer(refunded %v) = %v, want porttest-holder %d and one other buyer", withRefunded, got, want)
			}
		}
		if got, err := l.Orders().HeldByBuyer(t.Context(), NewProductID(), true); err != nil || len(got) != 0 {
			t.Fatalf("HeldByBuyer(unknown product) = %v, %v; want empty", got, err)
		}
	})

	t.Run("coupon uses count the orders whose use stands, per coupon and buyer", func(t *testing.T) {
		l := newLedger(t)
		p, other := createProduct(t, l), createProduct(t, l)
		withCoupon := func(prod domain.Product, buyer domain.BuyerID, code domain.CouponCode) domain.Order {
			t.Helper()
			o, err := domain.NewOrder(newOrderNo(), buyer, prod, 2, newKey(), now(), 15*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			o, err = o.WithCoupon(domain.Coupon{Code: code, Kind: domain.CouponFixed, Value: 1, Products: []domain.ProductID{prod.ID()}}, now())
			if err != nil {
				t.Fatal(err)
			}
			insertOrder(t, l, o)
			return o
		}
		move := func(o domain.Order, from domain.OrderStatus, change func(*domain.Order) error) domain.Order {
			t.Helper()
			if err := change(&o); err != nil {
				t.Fatal(err)
			}
			if won, err := l.Orders().Transition(t.Context(), o, from); err != nil || !won {
				t.Fatalf("Transition = %v, %v", won, err)
			}
			return o
		}
		pay := func(o *domain.Order) error { return o.MarkPaid(now(), o.Amount(), "pay-"+string(o.No())) }
		refund := func(o *domain.Order) error { return o.Refund(now(), "test") }
		a1 := withCoupon(p, "buyer-a", "SPRING") // PENDING: counts
		stored, err := l.Orders().Order(t.Context(), a1.No())
		if err != nil {
			t.Fatal(err)
		}
		if stored.Coupon() != "SPRING" || stored.Discount() != 1 || stored.Amount() != a1.Amount() || stored.Fingerprint() != a1.Fingerprint() {
			t.Fatalf("stored order lost its coupon: coupon %q discount %v amount %v", stored.Coupon(), stored.Discount(), stored.Amount())
		}
		move(withCoupon(p, "buyer-a", "SPRING"), domain.StatusPending, pay) // PAID: counts
		move(withCoupon(p, "buyer-b", "SPRING"), domain.StatusPending, pay) // another buyer
		refunded := move(withCoupon(p, "buyer-b", "SPRING"), domain.StatusPending, pay)
		refunded = move(refunded, domain.StatusPaid, refund) // refunded after holding codes: keeps its use
		if err := l.Flows().Append(t.Context(), domain.FlowEntry{ProductID: p.ID(), Ref: string(refunded.No()),
			Type: domain.FlowRefundVoid, Qty: 2, At: now()}); err != nil {
			t.Fatal(err)
		}
		closed := withCoupon(p, "buyer-a", "SPRING") // CLOSED: its use went back with the stock
		move(closed, domain.StatusPending, func(o *domain.Order) error { return o.Close(o.ExpiresAt()) })
		short := move(withCoupon(p, "buyer-a", "SPRING"), domain.StatusPending, func(o *domain.Order) error {
			return o.MarkUnfulfilled(now(), o.Amount(), "pay-short", "pool short")
		})
		move(short, domain.StatusUnfulfilled, refund) // refunded while UNFULFILLED: never held
		withCoupon(p, "buyer-a", "AUTUMN")
		withCoupon(other, "buyer-a", "SPRING")      // another product
		insertOrder(t, l, newOrder(t, p, 1, now())) // no coupon
		got, err := l.Orders().CouponUses(t.Context(), p.ID())
		if err != nil {
			t.Fatal(err)
		}
		want := domain.CouponCounts{
			"SPRING": {Uses: 4, Buyers: map[domain.BuyerID]int64{"buyer-a": 2, "buyer-b": 2}},
			"AUTUMN": {Uses: 1, Buyers: map[domain.BuyerID]int64{"buyer-a": 1}},
		}
		if !got.Equal(want) || len(got) != 2 {
			t.Fatalf("CouponUses = %+v, want %+v", got, want)
		}
		if got, err := l.Orders().CouponUses(t.Context(), NewProductID()); err != nil || len(got) != 0 {
			t.Fatalf("CouponUses(unknown product) = %v, %v; want empty", got, err)
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
