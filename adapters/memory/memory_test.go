package memory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestGateContract(t *testing.T) {
	// One fake clock for every case's gate: the suite's windows pass without sleeping.
	clock := memory.NewFakeClock(time.Now())
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return memory.NewGate(clock) },
		porttest.WithElapse(func(_ *testing.T, d time.Duration) { clock.Advance(d) }), porttest.WithNow(clock.Now))
}

func TestLedgerContract(t *testing.T) {
	porttest.RunLedger(t, func(*testing.T) domain.Ledger { return memory.NewLedger() })
}

func TestLedgerContractOnOneSharedLedger(t *testing.T) {
	// Real databases keep state across cases; the suite must not care.
	shared := memory.NewLedger()
	porttest.RunLedger(t, func(*testing.T) domain.Ledger { return shared })
}

func TestDelayQueueContract(t *testing.T) {
	porttest.RunDelayQueue(t, func(t *testing.T, handler func(context.Context, domain.OrderNo) error) domain.DelayQueue {
		q := memory.NewDelayQueue(memory.SystemClock{})
		q.Consume(handler)
		t.Cleanup(q.Close)
		return q
	})
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func gateWithStock(t *testing.T, stock int64) (*memory.Gate, *memory.FakeClock, domain.ProductID) {
	t.Helper()
	clock := memory.NewFakeClock(t0)
	g := memory.NewGate(clock)
	p := porttest.NewProductID()
	if err := g.Rebuild(t.Context(), p, domain.GateLevels{Stock: stock}); err != nil {
		t.Fatal(err)
	}
	return g, clock, p
}

func reservation(p domain.ProductID, key domain.IdempotencyKey, no domain.OrderNo, ttl time.Duration) domain.Reservation {
	return domain.Reservation{Product: p, Buyer: "buyer-1", Key: key, Qty: 1, OrderNo: no,
		Fingerprint: domain.RequestFingerprint(p, 1), KeyTTL: ttl}
}

func mustReserve(t *testing.T, g *memory.Gate, r domain.Reservation, want domain.ReserveOutcome) domain.ReserveResult {
	t.Helper()
	res, err := g.Reserve(t.Context(), r)
	if err != nil || res.Outcome != want {
		t.Fatalf("Reserve(%s) = %+v, %v; want outcome %d", r.OrderNo, res, err, want)
	}
	return res
}

func TestGateClaimExpiresAfterKeyTTL(t *testing.T) {
	g, clock, p := gateWithStock(t, 10)
	first := reservation(p, "key-00000001", "order-1", time.Minute)
	mustReserve(t, g, first, domain.Reserved)

	clock.Advance(time.Minute - time.Second)
	retry := first
	retry.OrderNo = "order-2"
	if res := mustReserve(t, g, retry, domain.Replayed); res.ExistingOrder != "order-1" {
		t.Fatalf("replay points at %s, want order-1", res.ExistingOrder)
	}

	clock.Advance(time.Second) // exactly the TTL: the claim is gone
	mustReserve(t, g, retry, domain.Reserved)
	// The first order's late Cancel must not touch the new claim or return its units.
	if cancelled, err := g.Cancel(t.Context(), first); err != nil || cancelled {
		t.Fatalf("Cancel of the expired claim = %v, %v; want false, nil", cancelled, err)
	}
	if l, _, _ := g.Levels(t.Context(), p); l.Stock != 8 || l.Sold != 2 {
		t.Fatalf("Levels = %+v, want 8/2", l)
	}
}

func TestGateDefaultKeyTTLIsTenMinutes(t *testing.T) {
	g, clock, p := gateWithStock(t, 10)
	r := reservation(p, "key-00000001", "order-1", 0)
	mustReserve(t, g, r, domain.Reserved)
	clock.Advance(memory.DefaultKeyTTL - time.Nanosecond)
	mustReserve(t, g, r, domain.Replayed)
	clock.Advance(time.Nanosecond)
	mustReserve(t, g, r, domain.Reserved)
}

func TestGateApplyMarkerExpiresAfterSevenDays(t *testing.T) {
	g, clock, p := gateWithStock(t, 10)
	c := domain.GateChange{Product: p, Ref: "batch-1", Stock: 1}
	for _, want := range []bool{true, false} {
		if applied, _ := g.Apply(t.Context(), c); applied != want {
			t.Fatalf("Apply = %v, want %v", applied, want)
		}
	}
	clock.Advance(memory.MarkerTTL)
	if applied, _ := g.Apply(t.Context(), c); !applied {
		t.Fatal("Apply after the marker expired = false, want true")
	}
}

func TestGateFlushForgetsEverything(t *testing.T) {
	g, _, p := gateWithStock(t, 10)
	r := reservation(p, "key-00000001", "order-1", time.Minute)
	mustReserve(t, g, r, domain.Reserved)
	g.Flush()
	if _, ok, _ := g.Levels(t.Context(), p); ok {
		t.Fatal("Levels ok after Flush")
	}
	mustReserve(t, g, r, domain.GateMissing)
	if applied, _ := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "x", Stock: 1}); applied {
		t.Fatal("Apply after Flush applied to a product the gate lost")
	}
}

func TestGateFlushForgetsHoldsAndBudgets(t *testing.T) {
	g, _, p := gateWithStock(t, 10)
	r := reservation(p, "key-00000001", "order-1", time.Minute)
	r.BuyerCap, r.BuyerWindow = 1, time.Hour
	mustReserve(t, g, r, domain.Reserved)
	g.Flush()
	if err := g.Rebuild(t.Context(), p, domain.GateLevels{Stock: 10}); err != nil {
		t.Fatal(err)
	}
	if hs, _ := g.Holds(t.Context(), p, 0, 10); len(hs) != 0 {
		t.Fatalf("Holds after Flush = %+v, want none", hs)
	}
	again := reservation(p, "key-00000002", "order-2", time.Minute)
	again.BuyerCap, again.BuyerWindow = 1, time.Hour
	mustReserve(t, g, again, domain.Reserved) // the budget went with the flush
}

// A reservation is held from the gate's own clock, to the millisecond.
func TestGateHoldTimeIsTheGatesClock(t *testing.T) {
	g, clock, p := gateWithStock(t, 10)
	clock.Set(t0.Add(1234567 * time.Nanosecond))
	mustReserve(t, g, reservation(p, "key-00000001", "order-1", time.Minute), domain.Reserved)
	hs, err := g.Holds(t.Context(), p, 0, 10)
	if err != nil || len(hs) != 1 || !hs[0].At.Equal(t0.Add(time.Millisecond)) || hs[0].Qty != 1 || hs[0].OrderNo != "order-1" {
		t.Fatalf("Holds = %+v, %v; want order-1 held at %v", hs, err, t0.Add(time.Millisecond))
	}
}

func TestGateKeylessReservationNeedsRef(t *testing.T) {
	g, _, p := gateWithStock(t, 10)
	r := reservation(p, "", "order-1", time.Minute)
	if _, err := g.Reserve(t.Context(), r); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("Reserve without key or ref: err = %v, want ErrInvalidInput", err)
	}
	if _, err := g.Cancel(t.Context(), r); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("Cancel without key or ref: err = %v, want ErrInvalidInput", err)
	}
}

func TestLedgerAssignsIDsAboveExplicitOnes(t *testing.T) {
	l := memory.NewLedger()
	create := func(id domain.ProductID) domain.ProductID {
		p, err := domain.NewProduct(id, "p", 100, 1, t0)
		if err != nil {
			t.Fatal(err)
		}
		created, err := l.Products().Create(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		return created.ID()
	}
	if got := create(0); got != 1 {
		t.Fatalf("first assigned id = %d, want 1", got)
	}
	create(10)
	if got := create(0); got != 11 {
		t.Fatalf("id after explicit 10 = %d, want 11", got)
	}
}

func TestLedgerAllocatesOldestSellableFirstAndRecycledLast(t *testing.T) {
	l := memory.NewLedger()
	var codes []domain.CardCode
	for i := range 3 {
		c, _ := domain.ParseCardCode(fmt.Sprintf("CODE-%d", i))
		codes = append(codes, c)
	}
	if _, err := l.Cards().Import(t.Context(), 1, codes, 1); err != nil {
		t.Fatal(err)
	}
	first, _ := l.Cards().Allocate(t.Context(), 1, "order-1", 1)
	if n, err := l.Cards().Reclaim(t.Context(), "order-1", domain.CardRecycled); err != nil || n != 1 {
		t.Fatalf("Reclaim = %d, %v", n, err)
	}
	var got []int64
	for i := range 3 {
		cards, err := l.Cards().Allocate(t.Context(), 1, domain.OrderNo(fmt.Sprintf("order-%d", i+2)), 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cards[0].ID)
	}
	if want := []int64{first[0].ID + 1, first[0].ID + 2, first[0].ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("allocation order = %v, want %v (recycled codes go to the back)", got, want)
	}
	// The recycled card keeps its new order; its old order has no cards.
	if cards, _ := l.Cards().Cards(t.Context(), "order-1"); len(cards) != 0 {
		t.Fatalf("Cards(order-1) = %v, want none", cards)
	}
}

func TestLedgerTransactionStoreIsDeadAfterCommit(t *testing.T) {
	l := memory.NewLedger()
	var leaked domain.Store
	if err := l.Atomically(t.Context(), func(tx domain.Store) error { leaked = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := leaked.Products().Products(t.Context()); err == nil {
		t.Fatal("a transaction's store still works after Atomically returned")
	}
}

func TestLedgerAtomicallyRefusesCancelledContext(t *testing.T) {
	l := memory.NewLedger()
	c, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	err := l.Atomically(c, func(domain.Store) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Atomically on a cancelled context = %v (ran %v), want context.Canceled without running", err, ran)
	}
}

func TestPublisherFailNext(t *testing.T) {
	p := memory.NewPublisher()
	p.FailNext(2)
	m := domain.OutboxMessage{ID: 1, Topic: domain.TopicDelivered, Key: "k", Payload: []byte("abc")}
	for range 2 {
		if err := p.Publish(t.Context(), m); !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("Publish with an injected failure: err = %v, want ErrUnavailable", err)
		}
	}
	if len(p.Published()) != 0 {
		t.Fatal("failed publishes were recorded")
	}
	if err := p.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	m.Payload[0] = 'X'
	got := p.Published()
	if len(got) != 1 || string(got[0].Payload) != "abc" {
		t.Fatalf("Published = %+v, want the one message with its own copy of the payload", got)
	}
	got[0].Payload[0] = 'Y'
	if string(p.Published()[0].Payload) != "abc" {
		t.Fatal("Published hands out the recorded payload itself")
	}
}

func TestDelayQueueHoldsMessagesUntilConsume(t *testing.T) {
	q := memory.NewDelayQueue(memory.SystemClock{})
	t.Cleanup(q.Close)
	for _, no := range []domain.OrderNo{"order-1", "order-2"} {
		if err := q.ScheduleClose(t.Context(), no, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // let the timers fire with no handler
	if q.Pending() != 2 {
		t.Fatalf("Pending = %d before Consume, want 2", q.Pending())
	}
	got := make(chan domain.OrderNo, 2)
	q.Consume(func(_ context.Context, no domain.OrderNo) error { got <- no; return nil })
	seen := map[domain.OrderNo]bool{}
	for len(seen) < 2 {
		select {
		case no := <-got:
			seen[no] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("held messages not delivered after Consume; got %v", seen)
		}
	}
	waitFor(t, func() bool { return q.Pending() == 0 })
}

func TestDelayQueueCloseWaitsForHandlersAndStopsTimers(t *testing.T) {
	q := memory.NewDelayQueue(memory.SystemClock{})
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	q.Consume(func(context.Context, domain.OrderNo) error {
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
		return nil
	})
	_ = q.ScheduleClose(t.Context(), "now", time.Now())
	_ = q.ScheduleClose(t.Context(), "later", time.Now().Add(time.Hour))
	<-started
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a handler was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if q.Pending() != 1 {
		t.Fatalf("Pending = %d after Close, want 1 (the undelivered later message)", q.Pending())
	}
	if err := q.ScheduleClose(t.Context(), "after", time.Now()); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("ScheduleClose after Close: err = %v, want ErrUnavailable", err)
	}
}

func TestDelayQueueMeasuresDelayWithItsClock(t *testing.T) {
	clock := memory.NewFakeClock(t0)
	q := memory.NewDelayQueue(clock)
	t.Cleanup(q.Close)
	got := make(chan domain.OrderNo, 1)
	q.Consume(func(_ context.Context, no domain.OrderNo) error { got <- no; return nil })
	// Due an hour after the epoch of the fake clock, which already stands two hours later.
	clock.Advance(2 * time.Hour)
	_ = q.ScheduleClose(t.Context(), "order-1", t0.Add(time.Hour))
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a message due by the queue's clock was not delivered")
	}
}

func TestAlertsRecordAndLog(t *testing.T) {
	var buf bytes.Buffer
	a := memory.NewAlerts(slog.New(slog.NewTextHandler(&buf, nil)))
	al := domain.Alert{Kind: "pool-short", Product: 42, OrderNo: "order-1", Message: "2 codes missing"}
	a.Alert(t.Context(), al)
	if got := a.Alerts(); len(got) != 1 || got[0] != al {
		t.Fatalf("Alerts = %+v, want [%+v]", got, al)
	}
	line := buf.String()
	for _, want := range []string{"level=ERROR", "kind=pool-short", "product=42", "order_no=order-1", `message="2 codes missing"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	memory.NewAlerts(nil) // falls back to slog.Default() without panicking
}

func TestFakeClock(t *testing.T) {
	c := memory.NewFakeClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatal("Now != start")
	}
	if got := c.Advance(time.Minute); !got.Equal(t0.Add(time.Minute)) || !c.Now().Equal(got) {
		t.Fatalf("Advance = %s, Now = %s", got, c.Now())
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Fatal("Set did not move the clock")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
