package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// payMember is the batch member of paying o from status from: the order paid now, its pay
// flow row and a delivery message.
func payMember(t testing.TB, o domain.Order, from domain.OrderStatus) mysqlstore.PayMember {
	t.Helper()
	now := time.Now().UTC()
	paid := o
	if err := paid.MarkPaid(now, o.Amount(), "pay-"+string(o.No())); err != nil {
		t.Fatal(err)
	}
	return moveMember(o, paid, from, true, domain.FlowPay, now)
}

// moveMember is the batch member that moves o to moved from status from: with its codes or
// none, its flow row of type t and one test message.
func moveMember(o, moved domain.Order, from domain.OrderStatus, codes bool, t domain.FlowType, now time.Time) mysqlstore.PayMember {
	return mysqlstore.PayMember{Paid: moved, From: from, Codes: codes,
		Flows:  []domain.FlowEntry{{ProductID: o.Product(), Ref: string(o.No()), Type: t, Qty: int64(o.Qty()), At: now}},
		Outbox: []domain.OutboxMessage{{Topic: "test.delivered", Key: string(o.No()), Payload: []byte("{}"), At: now}}}
}

// TestPayBatchDecidesEachMemberAsItsOwnTransactionWould: of one batch, the members whose order
// is still PENDING and whose codes are free are stored together; an order paid already and a
// repeat of a stored member lost their race, as their own Transition would answer; a member
// the pool cannot serve any more is left to run alone; nothing of those is written.
func TestPayBatchDecidesEachMemberAsItsOwnTransactionWould(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	importN(t, l, p, 8)
	var os []domain.Order
	for _, q := range []int{1, 2, 1, 2, 1, 3} {
		os = append(os, newPendingOrder(t, l, p, q))
	}
	paidBefore := newPendingOrder(t, l, p, 1)
	if _, err := pay(ctx, l, paidBefore, false); err != nil { // takes 1 of the 8: 7 left
		t.Fatal(err)
	}
	var members []mysqlstore.PayMember
	for _, o := range os {
		members = append(members, payMember(t, o, domain.StatusPending))
	}
	members = append(members, payMember(t, os[0], domain.StatusPending), payMember(t, paidBefore, domain.StatusPending))

	out, err := l.PayBatch(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	// 1+2+1+2+1 = 7 codes for the first five; the sixth (3) finds none left and runs alone;
	// the repeat of the first and the order paid before lost.
	want := []mysqlstore.PayOutcome{mysqlstore.PayStored, mysqlstore.PayStored, mysqlstore.PayStored, mysqlstore.PayStored,
		mysqlstore.PayStored, mysqlstore.PayAlone, mysqlstore.PayLost, mysqlstore.PayLost}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
	seen := map[string]bool{}
	for i, o := range os {
		got, err := l.Orders().Order(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		cards, err := l.Cards().Cards(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		flows, err := l.Flows().Entries(ctx, string(o.No()))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := l.Outbox().ByKey(ctx, string(o.No()), "test.delivered")
		if err != nil {
			t.Fatal(err)
		}
		if out[i] == mysqlstore.PayStored {
			if got.Status() != domain.StatusPaid || got.PaymentRef() != "pay-"+string(o.No()) || len(cards) != o.Qty() ||
				len(flows) != 1 || flows[0].Type != domain.FlowPay || len(msgs) != 1 {
				t.Fatalf("stored member %d: %s, %d codes, flows %+v, %d messages", i, got.Status(), len(cards), flows, len(msgs))
			}
			for _, c := range cards {
				if seen[c.Code.Reveal()] {
					t.Fatalf("code sold twice: %s", c.Code.Reveal())
				}
				seen[c.Code.Reveal()] = true
			}
			continue
		}
		if got.Status() != domain.StatusPending || len(cards) != 0 || len(flows) != 0 || len(msgs) != 0 {
			t.Fatalf("member %d left alone was written: %s, %d codes, flows %+v, %d messages", i, got.Status(), len(cards), flows, len(msgs))
		}
	}
	// Alone, the last one is refused for a real shortage, as today.
	if _, err := pay(ctx, l, os[5], true); !errors.Is(err, domain.ErrInsufficientCards) {
		t.Fatalf("the member left alone, paid alone: %v, want ErrInsufficientCards", err)
	}
}

// TestPayBatchFailsWholeOnAnyError: a member whose flow row exists already fails the batch,
// and nothing of any member is written.
func TestPayBatchFailsWholeOnAnyError(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	importN(t, l, p, 4)
	a, b := newPendingOrder(t, l, p, 1), newPendingOrder(t, l, p, 1)
	if err := l.Flows().Append(ctx, domain.FlowEntry{ProductID: p, Ref: string(b.No()), Type: domain.FlowPay, Qty: 1,
		At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err := l.PayBatch(ctx, []mysqlstore.PayMember{payMember(t, a, domain.StatusPending), payMember(t, b, domain.StatusPending)})
	if !errors.Is(err, domain.ErrDuplicateFlow) {
		t.Fatalf("batch with a duplicate flow row: %v, want ErrDuplicateFlow", err)
	}
	for _, o := range []domain.Order{a, b} {
		got, _ := l.Orders().Order(ctx, o.No())
		cards, _ := l.Cards().Cards(ctx, o.No())
		if got.Status() != domain.StatusPending || len(cards) != 0 {
			t.Fatalf("%s after the failed batch: %s with %d codes", o.No(), got.Status(), len(cards))
		}
	}
	if counts, _ := l.Cards().Counts(ctx, p); counts[domain.CardUnsold] != 4 {
		t.Fatalf("codes after the failed batch: %v", counts)
	}
}

// TestPayBatchesRacingOnOneProduct: 16 goroutines send batches of overlapping members (every
// order is in two batches) on one product with fewer codes than asked. Every order is paid at
// most once, by a batch or alone; no code is sold twice; each paid order holds its qty.
func TestPayBatchesRacingOnOneProduct(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	const pool, orders, workers = 60, 48, 16
	p := createProduct(t, l)
	importN(t, l, p, pool)
	var os []domain.Order
	for i := range orders {
		os = append(os, newPendingOrder(t, l, p, 1+i%3)) // 96 units asked of 60
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			var members []mysqlstore.PayMember
			var mine []domain.Order
			for i := range 6 { // worker w and w+8 share their orders
				o := os[((w%8)*6+i)%orders]
				mine = append(mine, o)
				members = append(members, payMember(t, o, domain.StatusPending))
			}
			out, err := l.PayBatch(ctx, members)
			if err != nil {
				t.Errorf("batch: %v", err)
				return
			}
			for i, o := range mine {
				if out[i] != mysqlstore.PayAlone {
					continue
				}
				if _, err := pay(ctx, l, o, true); err != nil && !errors.Is(err, domain.ErrInsufficientCards) && !errors.Is(err, errLostRace) {
					t.Errorf("pay %s alone: %v", o.No(), err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	sold := 0
	for _, o := range os {
		got, err := l.Orders().Order(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		cards, _ := l.Cards().Cards(ctx, o.No())
		flows, _ := l.Flows().Entries(ctx, string(o.No()))
		pays := 0
		for _, f := range flows {
			if f.Type == domain.FlowPay {
				pays++
			}
		}
		switch got.Status() {
		case domain.StatusPaid:
			if len(cards) != o.Qty() || pays != 1 {
				t.Fatalf("%s PAID with %d of %d codes and %d pay rows", o.No(), len(cards), o.Qty(), pays)
			}
		case domain.StatusPending:
			if len(cards) != 0 || pays != 0 {
				t.Fatalf("%s PENDING with %d codes and %d pay rows", o.No(), len(cards), pays)
			}
		default:
			t.Fatalf("%s is %s", o.No(), got.Status())
		}
		for _, c := range cards {
			if seen[c.Code.Reveal()] {
				t.Fatalf("code sold twice: %s", c.Code.Reveal())
			}
			seen[c.Code.Reveal()] = true
		}
		sold += len(cards)
	}
	counts, err := l.Cards().Counts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if int(counts[domain.CardSold]) != sold || sold+int(counts[domain.CardUnsold]) != pool {
		t.Fatalf("counts %v, %d codes sold to orders", counts, sold)
	}
	if sold < pool-2 { // 96 units were asked of 60: the pool runs dry but for what no order fits
		t.Fatalf("only %d of %d codes sold", sold, pool)
	}
}

// BenchmarkPay32Orders pays 32 orders of one product (one code each): one transaction each,
// from 32 goroutines at once, against one PayBatch of the 32. An op is the 32 payments.
func BenchmarkPay32Orders(b *testing.B) {
	l := newLedger(b)
	b.Cleanup(func() { markTestMessagesSent(b) })
	setup := func() []domain.Order {
		b.StopTimer()
		defer b.StartTimer()
		p := createProduct(b, l)
		importN(b, l, p, 32)
		os := make([]domain.Order, 32)
		for i := range os {
			os[i] = newPendingOrder(b, l, p, 1)
		}
		return os
	}
	b.Run("alone", func(b *testing.B) {
		for range b.N {
			os := setup()
			var wg sync.WaitGroup
			for _, o := range os {
				wg.Go(func() {
					if _, err := pay(b.Context(), l, o, true); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	})
	b.Run("batch", func(b *testing.B) {
		for range b.N {
			os := setup()
			members := make([]mysqlstore.PayMember, len(os))
			for i, o := range os {
				members[i] = payMember(b, o, domain.StatusPending)
			}
			out, err := l.PayBatch(b.Context(), members)
			if err != nil {
				b.Fatal(err)
			}
			for _, x := range out {
				if x != mysqlstore.PayStored {
					b.Fatalf("outcomes %v", out)
				}
			}
		}
	})
}

// closeMember is the batch member of closing the expired PENDING order o: no codes, its
// timeout-restore flow row and a message for the gate.
func closeMember(t testing.TB, o domain.Order) mysqlstore.PayMember {
	t.Helper()
	closed := o
	if err := closed.Close(o.ExpiresAt().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	return moveMember(o, closed, domain.StatusPending, false, domain.FlowTimeoutRestore, time.Now().UTC())
}

// TestPayBatchMixesPaymentsAndCloses: closes take no codes and are stored beside the
// payments; a payment the pool cannot serve and a close of an order the batch already moved
// run alone. Each stored order carries exactly what its own transaction would have written.
func TestPayBatchMixesPaymentsAndCloses(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	importN(t, l, p, 2)
	a, b, c, d := newPendingOrder(t, l, p, 1), newPendingOrder(t, l, p, 1), newPendingOrder(t, l, p, 2), newPendingOrder(t, l, p, 3)
	members := []mysqlstore.PayMember{payMember(t, a, domain.StatusPending), closeMember(t, b), payMember(t, c, domain.StatusPending),
		closeMember(t, d), closeMember(t, a)}
	out, err := l.PayBatch(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	want := []mysqlstore.PayOutcome{mysqlstore.PayStored, mysqlstore.PayStored, mysqlstore.PayAlone, mysqlstore.PayStored, mysqlstore.PayLost}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
	for _, x := range []struct {
		o      domain.Order
		status domain.OrderStatus
		codes  int
		flow   domain.FlowType
	}{{a, domain.StatusPaid, 1, domain.FlowPay}, {b, domain.StatusClosed, 0, domain.FlowTimeoutRestore},
		{c, domain.StatusPending, 0, 0}, {d, domain.StatusClosed, 0, domain.FlowTimeoutRestore}} {
		got, err := l.Orders().Order(ctx, x.o.No())
		if err != nil {
			t.Fatal(err)
		}
		cards, _ := l.Cards().Cards(ctx, x.o.No())
		flows, _ := l.Flows().Entries(ctx, string(x.o.No()))
		var types []domain.FlowType
		for _, f := range flows {
			types = append(types, f.Type)
		}
		if got.Status() != x.status || len(cards) != x.codes {
			t.Fatalf("%s: %s with %d codes, want %s with %d", x.o.No(), got.Status(), len(cards), x.status, x.codes)
		}
		var wantTypes []domain.FlowType
		if x.flow != 0 {
			wantTypes = append(wantTypes, x.flow)
		}
		if fmt.Sprint(types) != fmt.Sprint(wantTypes) {
			t.Fatalf("%s: flow rows %v, want %v", x.o.No(), types, wantTypes)
		}
		if x.status == domain.StatusClosed && (got.Reason() != "payment timeout" || got.EndedAt().IsZero() || got.PaidAt() != (time.Time{})) {
			t.Fatalf("%s closed as %+v", x.o.No(), got.Record())
		}
	}
	// The member that lost would have lost alone too.
	if err := closeExpired(ctx, l, a); !errors.Is(err, errLostRace) {
		t.Fatalf("closing the paid order alone: %v, want the lost race", err)
	}
	if counts, _ := l.Cards().Counts(ctx, p); counts[domain.CardSold] != 1 || counts[domain.CardUnsold] != 1 {
		t.Fatalf("codes after the batch: %v", counts)
	}
}

// TestPayBatchOfClosesNeedsNoCodes: a batch of closes only, on a product that has no codes at
// all, stores every one of them.
func TestPayBatchOfClosesNeedsNoCodes(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	var members []mysqlstore.PayMember
	var os []domain.Order
	for q := range 5 {
		o := newPendingOrder(t, l, p, 1+q%2)
		os = append(os, o)
		members = append(members, closeMember(t, o))
	}
	out, err := l.PayBatch(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range os {
		got, _ := l.Orders().Order(ctx, o.No())
		if out[i] != mysqlstore.PayStored || got.Status() != domain.StatusClosed {
			t.Fatalf("%s: outcome %v, %s", o.No(), out[i], got.Status())
		}
	}
}

// TestPayBatchDoesNotWaitForALockedOrder: while another transaction holds one member's order
// row, the batch stores the others at once and leaves that member to run alone (where it
// waits for the lock, as its own transaction would).
func TestPayBatchDoesNotWaitForALockedOrder(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	importN(t, l, p, 4)
	a, b := newPendingOrder(t, l, p, 1), newPendingOrder(t, l, p, 1)
	holder, err := rawDB(t).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	var status string
	if err := holder.QueryRowContext(ctx, "SELECT status FROM orders WHERE order_no = ? FOR UPDATE", string(a.No())).Scan(&status); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second) // far below innodb_lock_wait_timeout
	defer cancel()
	out, err := l.PayBatch(bctx, []mysqlstore.PayMember{payMember(t, a, domain.StatusPending), payMember(t, b, domain.StatusPending)})
	if err != nil {
		t.Fatalf("batch beside a held row: %v", err)
	}
	if out[0] != mysqlstore.PayAlone || out[1] != mysqlstore.PayStored {
		t.Fatalf("outcomes %v, want the held order alone and the other stored", out)
	}
	if got, _ := l.Orders().Order(ctx, a.No()); got.Status() != domain.StatusPending {
		t.Fatalf("the held order is %s", got.Status())
	}
}

// TestPayBatchRepeatOfAMemberLeftAloneRunsAlone: a repeat loses only to a member the batch
// stores; when that member is left alone (the pool is short for it), so is the repeat, whose
// own transaction may still win.
func TestPayBatchRepeatOfAMemberLeftAloneRunsAlone(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	importN(t, l, p, 1)
	a := newPendingOrder(t, l, p, 2)
	out, err := l.PayBatch(ctx, []mysqlstore.PayMember{payMember(t, a, domain.StatusPending), closeMember(t, a)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []mysqlstore.PayOutcome{mysqlstore.PayAlone, mysqlstore.PayAlone}; fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
	if got, _ := l.Orders().Order(ctx, a.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order after the batch: %s", got.Status())
	}
	if err := closeExpired(ctx, l, a); err != nil {
		t.Fatalf("the repeat alone: %v, want it to win", err)
	}
}

// TestPayBatchGivesEachMemberDistinctCodes: on a multi-use product the batch hands each member
// uses of different codes, every code's first use first; a member its locked uses cannot serve
// without a repeat runs alone, where Allocate refuses it as ErrTooFewDistinctCodes.
func TestPayBatchGivesEachMemberDistinctCodes(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	p := createProduct(t, l)
	codes := []domain.CardCode{newCode(t, "MULTI-A"), newCode(t, "MULTI-B")}
	if res, err := l.Cards().Import(ctx, p, codes, 3); err != nil || res.Uses != 6 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	var os []domain.Order
	var members []mysqlstore.PayMember
	for _, q := range []int{2, 1, 1, 2} {
		o := newPendingOrder(t, l, p, q)
		os = append(os, o)
		members = append(members, payMember(t, o, domain.StatusPending))
	}
	out, err := l.PayBatch(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	perCode := map[string]int{}
	for i, o := range os {
		if out[i] != mysqlstore.PayStored {
			t.Fatalf("member %d: %v, want stored", i, out[i])
		}
		cards, err := l.Cards().Cards(ctx, o.No())
		if err != nil || len(cards) != o.Qty() {
			t.Fatalf("member %d holds %d codes, %v; want %d", i, len(cards), err, o.Qty())
		}
		inOrder := map[string]bool{}
		for _, c := range cards {
			if inOrder[c.Code.Reveal()] {
				t.Fatalf("member %d got a code twice", i)
			}
			inOrder[c.Code.Reveal()] = true
			perCode[c.Code.Reveal()]++
		}
	}
	if perCode[codes[0].Reveal()] != 3 || perCode[codes[1].Reveal()] != 3 {
		t.Fatalf("uses sold per code %v, want 3 of each", perCode)
	}

	q := createProduct(t, l)
	if res, err := l.Cards().Import(ctx, q, []domain.CardCode{newCode(t, "MULTI-C")}, 3); err != nil || res.Uses != 3 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	two := newPendingOrder(t, l, q, 2)
	out, err = l.PayBatch(ctx, []mysqlstore.PayMember{payMember(t, two, domain.StatusPending)})
	if err != nil || out[0] != mysqlstore.PayAlone {
		t.Fatalf("a member of 2 on one code: %v, %v; want alone", out, err)
	}
	if _, err := pay(ctx, l, two, true); !errors.Is(err, domain.ErrTooFewDistinctCodes) {
		t.Fatalf("paid alone: %v, want ErrTooFewDistinctCodes", err)
	}
}
