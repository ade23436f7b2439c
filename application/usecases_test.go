package application_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// The delay queue, on real timers and the wall clock, closes an unpaid order on time.
func TestDelayQueueClosesUnpaidOrder(t *testing.T) {
	var q *memory.DelayQueue
	f := newFixture(t, withClock(memory.SystemClock{}),
		withConfig(func(c *application.Config) { c.OrderTimeout = 200 * time.Millisecond }),
		withQueue(func(c domain.Clock) domain.DelayQueue { q = memory.NewDelayQueue(c); return q }))
	q.Consume(f.shop.Sales.CloseExpired)
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)

	deadline := time.Now().Add(5 * time.Second)
	for f.order(t, o.No()).Status() == domain.StatusPending || q.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("order still %s, %d timeouts pending after 5s", f.order(t, o.No()).Status(), q.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := f.order(t, o.No()).Status(); st != domain.StatusClosed {
		t.Fatalf("order %s, want CLOSED", st)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 5 || lv.Sold != 0 {
		t.Fatalf("gate %+v after the timeout, want all 5 units back", lv)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowTimeoutRestore] != 1 {
		t.Fatalf("flow %v, want one timeout-restore row", ft)
	}
	f.assertInvariants(t, p.ID())
}

// The sweeper closes orders whose timeout message was lost, in batches, and only due ones.
func TestSweeperClosesOrdersWhoseTimeoutWasLost(t *testing.T) {
	q := &dropQueue{}
	f := newFixture(t, withQueue(func(domain.Clock) domain.DelayQueue { return q }),
		withConfig(func(c *application.Config) { c.SweepBatch = 2 }))
	p := f.createProduct(t, 3, 20)
	var early []domain.Order
	for i, b := range []domain.BuyerID{"alice", "bob", "carol", "dave", "erin"} {
		early = append(early, f.mustPlace(t, b, p.ID(), 1+i%3))
	}
	f.clock.Advance(5 * time.Minute)
	late := f.mustPlace(t, "frank", p.ID(), 2)
	if n := q.scheduled.Load(); n != 6 {
		t.Fatalf("%d timeouts scheduled, want 6", n)
	}

	f.clock.Advance(f.cfg.OrderTimeout - 5*time.Minute) // the first five are due, the last is not
	n, err := f.shop.Sales.Sweep(f.ctx)
	if err != nil || n != 5 {
		t.Fatalf("sweep: %d, %v; want 5 orders", n, err)
	}
	for _, o := range early {
		if st := f.order(t, o.No()).Status(); st != domain.StatusClosed {
			t.Fatalf("order %s %s after the sweep, want CLOSED", o.No(), st)
		}
	}
	if st := f.order(t, late.No()).Status(); st != domain.StatusPending {
		t.Fatalf("an order not yet due was %s by the sweep", st)
	}
	f.assertNoExpiredPending(t)
	f.assertInvariants(t, p.ID())
	if lv := f.levels(t, p.ID()); lv.Stock != 18 || lv.Sold != 2 {
		t.Fatalf("gate %+v, want 18 free and 2 held by the order not yet due", lv)
	}

	f.clock.Advance(5 * time.Minute)
	if n, err := f.shop.Sales.Sweep(f.ctx); err != nil || n != 1 {
		t.Fatalf("second sweep: %d, %v; want 1", n, err)
	}
	if n, err := f.shop.Sales.Sweep(f.ctx); err != nil || n != 0 {
		t.Fatalf("third sweep: %d, %v; want nothing left", n, err)
	}
	f.assertNoExpiredPending(t)
	f.assertInvariants(t, p.ID())
	if lv := f.levels(t, p.ID()); lv.Stock != 20 || lv.Sold != 0 {
		t.Fatalf("gate %+v, want every unit back", lv)
	}
}

// When the delay queue is down the order still stands and the sweeper closes it.
func TestOrderStandsWhenTimeoutCannotBeScheduled(t *testing.T) {
	f := newFixture(t, withQueue(func(domain.Clock) domain.DelayQueue { return downQueue{} }))
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	f.clock.Advance(f.cfg.OrderTimeout)
	if n, err := f.shop.Sales.Sweep(f.ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if st := f.order(t, o.No()).Status(); st != domain.StatusClosed {
		t.Fatalf("order %s, want CLOSED", st)
	}
	f.assertInvariants(t, p.ID())
}

// A redelivered timeout, an early one and one for an unknown order change nothing.
func TestTimeoutRedeliveryIsHarmless(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	is(t, "early timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
	if st := f.order(t, o.No()).Status(); st != domain.StatusPending {
		t.Fatalf("an early timeout made the order %s", st)
	}
	f.clock.Advance(f.cfg.OrderTimeout)
	for range 3 {
		is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
	}
	is(t, "timeout of an unknown order", f.shop.Sales.CloseExpired(f.ctx, "0000000000000000000000000000"), nil)
	if lv := f.levels(t, p.ID()); lv.Stock != 5 || lv.Sold != 0 {
		t.Fatalf("gate %+v, want the 2 units returned exactly once", lv)
	}
	f.assertInvariants(t, p.ID())
}

// A failed ledger write undoes the gate reservation and frees the key for a retry.
func TestPlaceOrderCompensatesFailedLedgerWrite(t *testing.T) {
	var fl *flakyLedger
	f := newFixture(t, withLedger(func(l *memory.Ledger) domain.Ledger { fl = &flakyLedger{Ledger: l}; return fl }))
	p := f.createProduct(t, 3, 5)
	before := f.levels(t, p.ID())

	fl.failures.Store(1)
	key := f.newKey()
	_, err := f.place("alice", p.ID(), 2, key)
	is(t, "place while the ledger is down", err, domain.ErrUnavailable)
	if lv := f.levels(t, p.ID()); lv != before {
		t.Fatalf("gate %+v after a failed order, want %+v", lv, before)
	}
	if tot, _ := f.ledger.Orders().Totals(f.ctx, p.ID()); len(tot) != 0 {
		t.Fatalf("a failed order left orders %v", tot)
	}

	res, err := f.place("alice", p.ID(), 2, key)
	is(t, "retry with the same key", err, nil)
	if res.Replayed || res.Order.Status() != domain.StatusPending {
		t.Fatalf("retry answered %+v (replayed %v), want a new order", res.Order.Record(), res.Replayed)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 3 || lv.Sold != 2 {
		t.Fatalf("gate %+v, want 3 free and 2 held", lv)
	}
	f.assertInvariants(t, p.ID())

	// A payment the ledger cannot record changes nothing; the provider's retry succeeds.
	fl.failures.Store(1)
	_, err = f.pay(t, res.Order.No())
	is(t, "pay while the ledger is down", err, domain.ErrUnavailable)
	if st := f.order(t, res.Order.No()).Status(); st != domain.StatusPending {
		t.Fatalf("a failed payment left the order %s", st)
	}
	f.assertInvariants(t, p.ID())
	f.mustPay(t, res.Order.No())
	f.assertInvariants(t, p.ID())

	// A late payment the ledger cannot record gives its new reservation back.
	late := f.mustPlace(t, "bob", p.ID(), 3)
	f.clock.Advance(f.cfg.OrderTimeout)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, late.No()), nil)
	before = f.levels(t, p.ID())
	fl.failures.Store(1)
	_, err = f.pay(t, late.No())
	is(t, "late pay while the ledger is down", err, domain.ErrUnavailable)
	if lv := f.levels(t, p.ID()); lv != before {
		t.Fatalf("gate %+v after a failed late payment, want %+v", lv, before)
	}
	f.assertInvariants(t, p.ID())
	if o := f.mustPay(t, late.No()); o.Status() != domain.StatusPaid {
		t.Fatalf("late payment retried: %s, want PAID", o.Status())
	}
	f.assertInvariants(t, p.ID())
}

// When the gate loses its keys, it is rebuilt from the ledger, and the ledger's unique
// (buyer, key) still answers replays without reserving twice.
func TestReplayAfterGateLostItsKeys(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 10)
	keyA, keyB, keyC := f.newKey(), f.newKey(), f.newKey()
	a, err := f.place("alice", p.ID(), 2, keyA)
	is(t, "place a", err, nil)
	f.mustPay(t, a.Order.No())
	b, err := f.place("bob", p.ID(), 1, keyB)
	is(t, "place b", err, nil)
	c, err := f.place("carol", p.ID(), 3, keyC)
	is(t, "place c", err, nil)
	f.assertInvariants(t, p.ID())

	f.gate.Flush()
	_, err = f.place("dave", p.ID(), 1, f.newKey())
	is(t, "place while the gate knows nothing", err, domain.ErrGateNotReady)
	// A change while the gate is empty: the ledger records it, the rebuild counts it.
	if _, err := f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: c.Order.No(), Amount: c.Order.Amount()}); err != nil {
		t.Fatalf("payment failed notice: %v", err)
	}
	rep, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true)
	if err != nil || !rep.OK() || !rep.Repaired {
		t.Fatalf("repair: %v, %+v", err, rep.Checks)
	}
	want := domain.GateLevels{Stock: 7, Sold: 3}
	if lv := f.levels(t, p.ID()); lv != want {
		t.Fatalf("rebuilt gate %+v, want %+v", lv, want)
	}

	for _, tc := range []struct {
		buyer domain.BuyerID
		key   string
		qty   int
		want  domain.OrderNo
	}{{"alice", keyA, 2, a.Order.No()}, {"bob", keyB, 1, b.Order.No()}, {"carol", keyC, 3, c.Order.No()}} {
		res, err := f.place(tc.buyer, p.ID(), tc.qty, tc.key)
		is(t, "replay of "+string(tc.buyer), err, nil)
		if !res.Replayed || res.Order.No() != tc.want {
			t.Fatalf("replay of %s answered %s (replayed %v), want %s", tc.buyer, res.Order.No(), res.Replayed, tc.want)
		}
	}
	_, err = f.place("alice", p.ID(), 1, keyA)
	is(t, "key reused with another qty", err, domain.ErrIdempotencyMismatch)
	if lv := f.levels(t, p.ID()); lv != want {
		t.Fatalf("gate %+v after replays, want %+v: a replay reserved", lv, want)
	}
	f.assertInvariants(t, p.ID())
}

// The card pool short of what the gate promised: the payment is kept visible (UNFULFILLED),
// the product frozen everywhere and an operator alerted; after a restock the order is fulfilled.
func TestPoolShortOfGateFreezesProduct(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 2)
	if err := f.gate.Rebuild(f.ctx, p.ID(), domain.GateLevels{Stock: 5}); err != nil {
		t.Fatal(err)
	}
	o := f.mustPlace(t, "alice", p.ID(), 3)
	got, err := f.pay(t, o.No())
	is(t, "pay with the pool short", err, nil)
	if got.Status() != domain.StatusUnfulfilled || f.order(t, o.No()).Status() != domain.StatusUnfulfilled {
		t.Fatalf("order %s, want UNFULFILLED", got.Status())
	}
	kinds := f.alertsFor(o.No())
	if !hasKind(kinds, "stock_inconsistency") || !hasKind(kinds, "paid_unfulfilled") {
		t.Fatalf("alerts %v, want stock_inconsistency and paid_unfulfilled", kinds)
	}
	if pr, _ := f.shop.Catalogue.Product(f.ctx, p.ID()); !pr.Frozen() {
		t.Fatalf("product not frozen in the catalogue")
	}
	if !f.levels(t, p.ID()).Frozen {
		t.Fatalf("product not frozen at the gate")
	}
	_, err = f.place("bob", p.ID(), 1, f.newKey())
	is(t, "place on the frozen product", err, domain.ErrProductFrozen)
	if c := f.counts(t, p.ID()); c[domain.CardSold] != 0 || c[domain.CardUnsold] != 2 {
		t.Fatalf("pool %v: the failed allocation was not rolled back", c)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowPay] != 0 || ft[domain.FlowUnfulfilled] != 1 {
		t.Fatalf("flow %v, want an unfulfilled-restore row and no pay row", ft)
	}
	if rep, _ := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), false); rep.OK() {
		t.Fatalf("reconcile does not see the inconsistency: %+v", rep.Checks)
	}

	f.addCodes(t, p.ID(), 3)
	is(t, "unfreeze", f.shop.Catalogue.UnfreezeProduct(f.ctx, p.ID()), nil)
	got, err = f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil after the restock", err, nil)
	if got.Status() != domain.StatusPaid {
		t.Fatalf("fulfilled order %s, want PAID", got.Status())
	}
	view, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader)
	if err != nil || len(view.Cards) != 3 {
		t.Fatalf("order view: %d codes, %v", len(view.Cards), err)
	}
	rep, err := f.shop.Catalogue.Reconcile(f.ctx, p.ID(), true)
	if err != nil || !rep.OK() {
		t.Fatalf("repair: %v %+v", err, rep.Checks)
	}
	f.assertInvariants(t, p.ID())
	if lv := f.levels(t, p.ID()); lv.Stock != 2 || lv.Sold != 3 || lv.Frozen {
		t.Fatalf("gate %+v, want 2 free, 3 sold, on sale", lv)
	}
}

// Invalid requests are refused before anything is reserved.
func TestPlaceOrderValidation(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 10)
	before := f.levels(t, p.ID())
	ok := f.newKey()
	for _, tc := range []struct {
		name    string
		buyer   domain.BuyerID
		product domain.ProductID
		qty     int
		key     string
		want    error
	}{
		{"empty key", "alice", p.ID(), 1, "", domain.ErrInvalidIdempotencyKey},
		{"7-character key", "alice", p.ID(), 1, "1234567", domain.ErrInvalidIdempotencyKey},
		{"65-character key", "alice", p.ID(), 1, strings.Repeat("k", 65), domain.ErrInvalidIdempotencyKey},
		{"key with spaces", "alice", p.ID(), 1, "key with spaces", domain.ErrInvalidIdempotencyKey},
		{"key with a slash", "alice", p.ID(), 1, "key/00000001", domain.ErrInvalidIdempotencyKey},
		{"qty 0", "alice", p.ID(), 0, ok, domain.ErrQtyOutOfRange},
		{"qty -1", "alice", p.ID(), -1, ok, domain.ErrQtyOutOfRange},
		{"qty over the limit", "alice", p.ID(), 4, ok, domain.ErrQtyOutOfRange},
		{"unknown product", "alice", 999, 1, ok, domain.ErrProductNotFound},
		{"product 0", "alice", 0, 1, ok, domain.ErrProductNotFound},
		{"negative product", "alice", -1, 1, ok, domain.ErrProductNotFound},
		{"empty buyer", "", p.ID(), 1, ok, domain.ErrInvalidInput},
		{"buyer with spaces", "a b", p.ID(), 1, ok, domain.ErrInvalidInput},
	} {
		_, err := f.place(tc.buyer, tc.product, tc.qty, tc.key)
		is(t, tc.name, err, tc.want)
		if lv := f.levels(t, p.ID()); lv != before {
			t.Fatalf("%s changed the gate: %+v -> %+v", tc.name, before, lv)
		}
	}
	if tot, _ := f.ledger.Orders().Totals(f.ctx, p.ID()); len(tot) != 0 {
		t.Fatalf("invalid requests left orders %v", tot)
	}
	// The bounds themselves are accepted; the key refused above for qty is still free.
	for _, tc := range []struct {
		key string
		qty int
	}{{"12345678", 1}, {strings.Repeat("k", 64), 3}, {"a.b_c:d-e", 2}, {ok, 1}} {
		if _, err := f.place("alice", p.ID(), tc.qty, tc.key); err != nil {
			t.Fatalf("key %q qty %d: %v", tc.key, tc.qty, err)
		}
	}
	f.assertInvariants(t, p.ID())
}

// One key belongs to one buyer: another buyer's same key is a different order.
func TestIdempotencyKeyIsScopedByBuyer(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 10)
	key := f.newKey()
	a, err := f.place("alice", p.ID(), 2, key)
	is(t, "alice", err, nil)
	b, err := f.place("bob", p.ID(), 2, key)
	is(t, "bob", err, nil)
	if b.Replayed || b.Order.No() == a.Order.No() {
		t.Fatalf("bob got alice's order %s", a.Order.No())
	}
	again, err := f.place("alice", p.ID(), 2, key)
	is(t, "alice again", err, nil)
	if !again.Replayed || again.Order.No() != a.Order.No() {
		t.Fatalf("alice's replay answered %s", again.Order.No())
	}
	f.assertInvariants(t, p.ID())
}

// A failed payment returns the stock; a later success is a late payment.
func TestPaymentFailedThenLateSuccess(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 3)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	got, err := f.shop.Payments.HandlePaymentCallback(f.ctx, f.callbackFor(t, o, "failed", o.Amount()))
	is(t, "failed callback", err, nil)
	if got.Status() != domain.StatusFailed {
		t.Fatalf("order %s, want FAILED", got.Status())
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 3 || lv.Sold != 0 {
		t.Fatalf("gate %+v, want the stock back", lv)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowFailedRestore] != 1 {
		t.Fatalf("flow %v, want a payment-failed-restore row", ft)
	}
	f.assertInvariants(t, p.ID())

	// The same failure notice again changes nothing.
	if _, err := f.shop.Payments.HandlePaymentCallback(f.ctx, f.callbackFor(t, o, "failed", o.Amount())); err != nil {
		t.Fatalf("repeated failure notice: %v", err)
	}
	got, err = f.payByCallback(t, o.No())
	is(t, "late success", err, nil)
	if got.Status() != domain.StatusPaid {
		t.Fatalf("late success: %s, want PAID", got.Status())
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowLateReserve] != 1 || ft[domain.FlowPay] != 1 {
		t.Fatalf("flow %v, want late-reserve and pay", ft)
	}
	f.assertInvariants(t, p.ID())
}

// A late payment that finds the stock gone is kept (UNFULFILLED, alert) and can be fulfilled
// after a restock, or refunded.
func TestLatePaymentWithoutStockIsUnfulfilled(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.clock.Advance(f.cfg.OrderTimeout)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
	rival := f.mustPlace(t, "bob", p.ID(), 2)
	got, err := f.payByCallback(t, o.No())
	is(t, "late payment", err, nil)
	if got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment without stock: %s, want UNFULFILLED", got.Status())
	}
	if !hasKind(f.alertsFor(o.No()), "paid_unfulfilled") {
		t.Fatalf("no alert for the unfulfilled payment: %v", f.alertsFor(o.No()))
	}
	if got.PaymentRef() == "" || got.PaidAt().IsZero() {
		t.Fatalf("the accepted payment is not recorded: %+v", got.Record())
	}
	f.assertInvariants(t, p.ID())

	_, err = f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil while sold out", err, domain.ErrSoldOut)
	f.mustPay(t, rival.No())
	f.addCodesHeld(t, p.ID(), 3)
	got, err = f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil after the restock", err, nil)
	if got.Status() != domain.StatusPaid {
		t.Fatalf("fulfilled: %s", got.Status())
	}
	f.assertInvariants(t, p.ID())
	_, err = f.shop.Sales.FulfilOrder(f.ctx, o.No())
	is(t, "fulfil a PAID order", err, domain.ErrInvalidTransition)

	// An UNFULFILLED order refunded instead: no codes, no stock move.
	late := f.mustPlace(t, "carol", p.ID(), 1)
	f.clock.Advance(f.cfg.OrderTimeout)
	is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, late.No()), nil)
	is(t, "freeze", f.shop.Catalogue.FreezeProduct(f.ctx, p.ID(), "audit"), nil)
	if got, err := f.pay(t, late.No()); err != nil || got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("late payment on a frozen product: %v, %s", err, got.Status())
	}
	lv := f.levels(t, p.ID())
	if got, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: late.No()}); err != nil ||
		got.Order.Status() != domain.StatusRefunded || got.Recycled != 0 || got.Voided != 0 {
		t.Fatalf("refund of an UNFULFILLED order: %v, %s, recycled %d, voided %d", err, got.Order.Status(), got.Recycled, got.Voided)
	}
	if f.levels(t, p.ID()) != lv {
		t.Fatalf("refunding an order without codes moved the gate")
	}
	f.assertInvariants(t, p.ID())
}

// Forged, unsigned, stale and tampered callbacks change nothing.
func TestPaymentCallbackVerification(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	good := f.callbackFor(t, o, "paid", o.Amount())

	forged := good
	forged.Signature = strings.Repeat("0", len(good.Signature))
	unsigned := good
	unsigned.Signature = ""
	tampered := good
	tampered.Body = []byte(strings.Replace(string(good.Body), fmt.Sprint(int64(o.Amount())), "1", 1))
	body, ts, sig, err := f.signer.SignedBody(paysig.Notice{OrderNo: string(o.No()), Status: "paid",
		Amount: int64(o.Amount())}, f.clock.Now().Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	stale := application.SignedCallback{Timestamp: ts, Signature: sig, Body: body}
	other, err := paysig.New("another-secret-of-the-provider", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, ts, sig, _ = other.SignedBody(paysig.Notice{OrderNo: string(o.No()), Status: "paid", Amount: int64(o.Amount())}, f.clock.Now())
	wrongKey := application.SignedCallback{Timestamp: ts, Signature: sig, Body: body}

	before := f.levels(t, p.ID())
	for name, cb := range map[string]application.SignedCallback{"forged": forged, "unsigned": unsigned,
		"tampered": tampered, "stale": stale, "other secret": wrongKey} {
		_, err := f.shop.Payments.HandlePaymentCallback(f.ctx, cb)
		is(t, name, err, domain.ErrBadSignature)
	}
	if st := f.order(t, o.No()).Status(); st != domain.StatusPending || f.levels(t, p.ID()) != before {
		t.Fatalf("a refused callback changed the order (%s) or the gate", st)
	}

	_, err = f.shop.Payments.HandlePaymentCallback(f.ctx, f.callbackFor(t, o, "paid", o.Amount()-1))
	is(t, "underpaid", err, domain.ErrAmountMismatch)
	if !hasKind(f.alertsFor(o.No()), "amount_mismatch") {
		t.Fatalf("no alert for the wrong amount")
	}
	unknown := f.signed(t, paysig.Notice{OrderNo: "0000000000000000000000000000", Status: "paid", Amount: 1})
	_, err = f.shop.Payments.HandlePaymentCallback(f.ctx, unknown)
	is(t, "unknown order", err, domain.ErrOrderNotFound)
	if st := f.order(t, o.No()).Status(); st != domain.StatusPending {
		t.Fatalf("order %s", st)
	}

	if got, err := f.shop.Payments.HandlePaymentCallback(f.ctx, good); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("good callback: %v, %s", err, got.Status())
	}
	// A second, different payment for a handled order is answered, and an operator alerted.
	second := f.signed(t, paysig.Notice{OrderNo: string(o.No()), Status: "paid", Amount: int64(o.Amount()), PaymentRef: "another-payment"})
	if got, err := f.shop.Payments.HandlePaymentCallback(f.ctx, second); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("second payment: %v, %s", err, got.Status())
	}
	if !hasKind(f.alertsFor(o.No()), "second_payment") {
		t.Fatalf("no alert for a second payment: %v", f.alertsFor(o.No()))
	}
	f.assertInvariants(t, p.ID())
}

// Buyers read their own codes once paid, and nobody else's.
func TestBuyerReadsOwnCodesOnly(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	codes := f.addCodes(t, p.ID(), 4)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	if err != nil || len(v.Cards) != 0 {
		t.Fatalf("unpaid order shows %d codes (%v)", len(v.Cards), err)
	}
	f.mustPay(t, o.No())
	v, err = f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	if err != nil || len(v.Cards) != 2 {
		t.Fatalf("paid order shows %d codes (%v), want 2", len(v.Cards), err)
	}
	for _, c := range v.Cards {
		if !strings.Contains(strings.Join(codes, " "), c.Code.Reveal()) {
			t.Fatalf("order shows a code that was never imported")
		}
	}
	_, err = f.shop.Sales.BuyerOrder(f.ctx, "bob", o.No())
	is(t, "another buyer's order", err, domain.ErrOrderNotFound)
	_, err = f.shop.Sales.BuyerOrder(f.ctx, "alice", "0000000000000000000000000000")
	is(t, "unknown order", err, domain.ErrOrderNotFound)
	f.assertInvariants(t, p.ID())
}

// A delivery event the broker refused is published once its backoff has passed, once.
func TestRelayRetriesFailedDelivery(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.mustPay(t, o.No())
	f.pub.FailNext(1)
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatalf("relay: %v", err)
	}
	if n := len(f.pub.Published()); n != 0 {
		t.Fatalf("%d events published while the broker was down", n)
	}
	if n, _ := f.ledger.Outbox().Backlog(f.ctx); n != 1 {
		t.Fatalf("backlog %d, want the delivery event kept", n)
	}
	// The first retry waits between half a second and a second.
	if n, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil || n != 0 {
		t.Fatalf("relay right after the failure sent %d (%v), want 0: the message waits for its backoff", n, err)
	}
	f.clock.Advance(time.Second)
	f.assertInvariants(t, p.ID()) // relays again
	if d := f.deliveries(t); d[o.No()] != 1 {
		t.Fatalf("deliveries %v, want one", d)
	}
}

// Imports count duplicates within and across imports, report malformed lines by number, take
// the first CSV field, span several batches and move the gate with them.
func TestImportCodes(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	text := strings.Join([]string{
		"# exported 2025-03-01", // 1 comment
		"AAAA-0001",             // 2
		"",                      // 3 blank
		"AAAA-0002",             // 4
		"AAAA-0001",             // 5 duplicate within the import
		"x",                     // 6 too short
		`"AAAA-0003",note`,      // 7 CSV, quoted
		"AAAA-0004, extra",      // 8 CSV
		"bad code",              // 9 space inside
		"  AAAA-0005  ",         // 10 padded
	}, "\n")
	rep := f.importLines(t, p.ID(), text)
	if rep.Added != 5 || rep.Duplicates != 1 || rep.Invalid != 2 || fmt.Sprint(rep.InvalidRows) != "[6 9]" {
		t.Fatalf("first import: %+v", rep)
	}
	rep = f.importLines(t, p.ID(), "AAAA-0002\nAAAA-0006\nAAAA-0003,again\n")
	if rep.Added != 1 || rep.Duplicates != 2 || rep.Invalid != 0 {
		t.Fatalf("second import: %+v", rep)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 6 {
		t.Fatalf("gate %+v, want 6 free", lv)
	}
	// A CSV export's header line ("code" as the first field of the first data line) is not a
	// code.
	rep = f.importLines(t, p.ID(), "# from the supplier\nCode,Expires\nAAAA-0007,2027-01-01\nx,2027-01-01\n")
	if rep.Added != 1 || rep.Duplicates != 0 || rep.Invalid != 1 || fmt.Sprint(rep.InvalidRows) != "[4]" {
		t.Fatalf("CSV with a header: %+v, want 1 added and line 4 invalid", rep)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 7 {
		t.Fatalf("gate %+v, want 7 free", lv)
	}

	// 2,500 fresh codes, 5 repeats of earlier lines of the same import (in later batches),
	// 3 codes of the first import and 25 malformed lines: three batches.
	fresh := f.newCodes(2500)
	var lines []string
	for i, c := range fresh {
		lines = append(lines, c)
		if i%500 == 499 {
			lines = append(lines, fresh[i-450]) // repeats across the batch boundary too
		}
		if i < 25 {
			lines = append(lines, "no") // malformed
		}
	}
	lines = append(lines, "AAAA-0001", "AAAA-0004", "AAAA-0006")
	rep = f.importLines(t, p.ID(), strings.Join(lines, "\n"))
	if rep.Added != 2500 || rep.Duplicates != 8 || rep.Invalid != 25 || len(rep.InvalidRows) != 20 {
		t.Fatalf("large import: added %d dup %d invalid %d rows %d", rep.Added, rep.Duplicates, rep.Invalid, len(rep.InvalidRows))
	}
	if rep.InvalidRows[0] != 2 || rep.InvalidRows[1] != 4 {
		t.Fatalf("invalid rows %v, want 2, 4, …", rep.InvalidRows)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 2507 || lv.Sold != 0 {
		t.Fatalf("gate %+v, want 2507 free", lv)
	}
	if c := f.counts(t, p.ID()); c[domain.CardUnsold] != 2507 {
		t.Fatalf("pool %v, want 2507 UNSOLD", c)
	}
	tot, _ := f.ledger.Flows().Totals(f.ctx, p.ID())
	if tot[domain.FlowStockIn] != 2507 {
		t.Fatalf("stock-in flow %d, want 2507", tot[domain.FlowStockIn])
	}
	f.assertInvariants(t, p.ID())

	_, err := f.shop.Catalogue.ImportCodes(f.ctx, 999, strings.NewReader("AAAA-0001"))
	is(t, "import into an unknown product", err, domain.ErrProductNotFound)
	// An import of nothing new writes nothing.
	before, _ := f.ledger.Flows().Totals(f.ctx, p.ID())
	rep = f.importLines(t, p.ID(), "AAAA-0001\n\n# nothing\n")
	after, _ := f.ledger.Flows().Totals(f.ctx, p.ID())
	if rep.Added != 0 || rep.Duplicates != 1 || fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("empty import: %+v, flow %v -> %v", rep, before, after)
	}
	f.assertInvariants(t, p.ID())
}

// Refunded codes that were never shown are sold again; voided ones never.
func TestRefundRecyclesOrVoidsCodes(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 0)
	f.addCodes(t, p.ID(), 2)
	a := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, a.No())
	first := f.soldCards(t, a.No()) // from the ledger: not a reveal
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: a.No()}); err != nil || res.Recycled != 2 || res.Voided != 0 {
		t.Fatalf("refund of unread codes: %v, recycled %d, voided %d; want 2 recycled", err, res.Recycled, res.Voided)
	}
	b := f.mustPlace(t, "bob", p.ID(), 2)
	f.mustPay(t, b.No())
	second := f.soldCards(t, b.No())
	if len(second) != 2 || second[0].ID != first[0].ID || second[1].ID != first[1].ID {
		t.Fatalf("recycled codes were not sold again")
	}
	if res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: b.No(), Void: true}); err != nil || res.Voided != 2 || res.Recycled != 0 {
		t.Fatalf("refund with void: %v, recycled %d, voided %d; want 2 voided", err, res.Recycled, res.Voided)
	}
	_, err := f.place("carol", p.ID(), 1, f.newKey())
	is(t, "order after the only codes were voided", err, domain.ErrSoldOut)
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: b.No()})
	is(t, "refund again", err, nil)
	if res.Order.Status() != domain.StatusRefunded || res.Voided != 2 || res.Recycled != 0 {
		t.Fatalf("refund again answered %s, recycled %d, voided %d; want the first refund's 2 voided",
			res.Order.Status(), res.Recycled, res.Voided)
	}
	f.assertInvariants(t, p.ID())
}

// A reservation whose answer was lost (the gate ran it, then the call timed out) is given
// back: the request fails, nothing stays held, and the buyer's retry with the same key
// places the order at once instead of waiting on an order that will never be written.
func TestPlaceOrderGivesBackAnAmbiguousReservation(t *testing.T) {
	var g *ambiguousGate
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { g = &ambiguousGate{Gate: m}; return g }))
	p := f.createProduct(t, 3, 5)
	before := f.levels(t, p.ID())
	g.failures.Store(1)
	key := f.newKey()
	_, err := f.place("alice", p.ID(), 2, key)
	is(t, "place while the gate times out", err, domain.ErrUnavailable)
	if lv := f.levels(t, p.ID()); lv != before {
		t.Fatalf("gate %+v after a failed order, want %+v: the units leaked", lv, before)
	}
	res, err := f.place("alice", p.ID(), 2, key)
	is(t, "retry with the same key", err, nil)
	if res.Replayed || res.Order.Status() != domain.StatusPending {
		t.Fatalf("retry answered %+v (replayed %v), want a new order", res.Order.Record(), res.Replayed)
	}
	f.assertInvariants(t, p.ID())
}

// A client retry that re-runs the reserve script (the first reply was lost) sees its own
// claim: the order is placed once, with the units taken once.
func TestPlaceOrderSurvivesAReRunReserveScript(t *testing.T) {
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { return retryingGate{m} }))
	p := f.createProduct(t, 3, 5)
	res, err := f.place("alice", p.ID(), 2, f.newKey())
	is(t, "place through a retrying gate", err, nil)
	if res.Replayed || res.Order.Status() != domain.StatusPending {
		t.Fatalf("answered %+v (replayed %v), want a new PENDING order", res.Order.Record(), res.Replayed)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 3 || lv.Sold != 2 {
		t.Fatalf("gate %+v, want stock 3 sold 2: reserved twice?", lv)
	}
	f.assertInvariants(t, p.ID())
}

// A lost reply to the order's COMMIT: if the order was stored, the buyer gets it and the
// reservation stays (giving it back would let the gate sell the units twice); if it was not,
// the reservation is given back.
func TestPlaceOrderWithALostCommitReply(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			var l *unknownCommitLedger
			f := newFixture(t, withLedger(func(m *memory.Ledger) domain.Ledger {
				l = &unknownCommitLedger{Ledger: m, commit: committed}
				return l
			}))
			p := f.createProduct(t, 3, 5)
			l.remaining.Store(1)
			res, err := f.place("alice", p.ID(), 2, f.newKey())
			lv := f.levels(t, p.ID())
			if committed {
				is(t, "place with a lost commit reply (committed)", err, nil)
				if res.Order.Status() != domain.StatusPending || lv.Stock != 3 || lv.Sold != 2 {
					t.Fatalf("order %v, gate %+v: want the PENDING order and its 2 units held", res.Order.Status(), lv)
				}
				f.track(res.Order)
			} else {
				is(t, "place with a lost commit reply (rolled back)", err, domain.ErrUnavailable)
				if lv.Stock != 5 || lv.Sold != 0 {
					t.Fatalf("gate %+v after a rolled-back order: want the units given back", lv)
				}
			}
			f.assertInvariants(t, p.ID())
		})
	}
}

// A lost reply to a payment's COMMIT (a batch member answered at its deadline, a connection
// cut after the COMMIT was sent): the callback answers unavailable, so the provider resends.
// Whether the commit happened or not, the resend settles the order PAID with its codes once,
// and nothing is held twice: for a late payment (a CLOSED order) the reservation of the lost
// attempt is kept, and the orphan sweep forgets it (committed: its units follow the PAID order)
// or returns it (not committed: the resend after the sweep takes the units again).
func TestPaymentWithALostCommitReplyIsSettledByTheResend(t *testing.T) {
	for _, late := range []bool{false, true} {
		for _, committed := range []bool{true, false} {
			t.Run(fmt.Sprintf("late=%v/committed=%v", late, committed), func(t *testing.T) {
				var l *unknownCommitLedger
				f := newFixture(t, withConfig(func(c *application.Config) { c.ReplayWait = 50 * time.Millisecond }),
					withLedger(func(m *memory.Ledger) domain.Ledger {
						l = &unknownCommitLedger{Ledger: m, commit: committed}
						return l
					}))
				p := f.createProduct(t, 2, 4)
				o := f.mustPlace(t, "alice", p.ID(), 2)
				want := domain.StatusPending
				if late {
					f.clock.Advance(f.cfg.OrderTimeout + time.Second)
					is(t, "timeout", f.shop.Sales.CloseExpired(f.ctx, o.No()), nil)
					want = domain.StatusClosed
				}
				l.remaining.Store(1)
				_, err := f.payByCallback(t, o.No())
				is(t, "the payment whose COMMIT reply was lost", err, domain.ErrUnavailable)
				if committed {
					want = domain.StatusPaid
				}
				if got := f.order(t, o.No()); got.Status() != want {
					t.Fatalf("after the lost reply the order is %s, want %s", got.Status(), want)
				}
				if late && !committed {
					// The lost attempt's late reservation is kept (it may have been used): the
					// resend waits on it and answers unavailable until the sweep returns it.
					_, err := f.payByCallback(t, o.No())
					is(t, "a resend while the lost attempt's reservation is held", err, domain.ErrUnavailable)
					f.clock.Advance(f.cfg.OrphanAfter + time.Second)
					if n, err := f.shop.Sales.SweepOrphans(f.ctx); err != nil || n != 1 {
						t.Fatalf("SweepOrphans = %d, %v; want the lost attempt's reservation returned", n, err)
					}
				}
				got, err := f.payByCallback(t, o.No())
				is(t, "the provider's resend", err, nil)
				if got.Status() != domain.StatusPaid || len(f.soldCards(t, o.No())) != 2 {
					t.Fatalf("after the resend: %s with %d codes, want PAID with 2", got.Status(), len(f.soldCards(t, o.No())))
				}
				if d := f.deliveries(t)[o.No()]; d > 1 {
					t.Fatalf("%d delivery events for one payment", d)
				}
				f.clock.Advance(f.cfg.OrphanAfter + time.Second)
				if _, err := f.shop.Sales.SweepOrphans(f.ctx); err != nil {
					t.Fatal(err)
				}
				if lv := f.levels(t, p.ID()); lv.Stock != 2 || lv.Sold != 2 {
					t.Fatalf("gate %+v, want stock 2 sold 2: the order's units held once", lv)
				}
				f.assertInvariants(t, p.ID())
			})
		}
	}
}

// Redis loses its keys mid-sale: orders are refused (never oversold on a missing key), the gate
// is rebuilt from the ledger by itself, sales resume, and the invariants hold — replays of
// orders placed before the loss still answer the original order.
// A gate that lost one product has lost them all when Redis restarted empty: the first order
// that finds its product missing has the other lost products rebuilt too, without waiting
// for an order of each (the readiness check reports the gate not ready until then).
func TestGateLossRebuildsEveryLostProduct(t *testing.T) {
	var g *memory.Gate
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { g = m; return m }),
		withConfig(func(c *application.Config) { c.RebuildDelay = 10 * time.Millisecond }))
	p := f.createProduct(t, 3, 10)
	q := f.createProduct(t, 3, 4)
	empty := f.createProduct(t, 3, 0)
	f.mustPlace(t, "bob", q.ID(), 1)

	g.Flush()
	_, err := f.place("carol", p.ID(), 1, f.newKey())
	is(t, "place while the gate has lost the product", err, domain.ErrGateNotReady)
	f.shop.WaitBackground()

	for _, c := range []struct {
		id          domain.ProductID
		stock, sold int64
	}{{p.ID(), 10, 0}, {q.ID(), 3, 1}, {empty.ID(), 0, 0}} {
		if lv := f.levels(t, c.id); lv.Stock != c.stock || lv.Sold != c.sold {
			t.Errorf("product %d rebuilt as %+v, want stock %d sold %d", c.id, lv, c.stock, c.sold)
		}
	}
	if n := f.alertCount("gate_rebuilt"); n != 3 {
		t.Fatalf("gate_rebuilt alerts: %d, want 3 (one per product)", n)
	}
	f.mustPlace(t, "dave", q.ID(), 3)
	f.assertInvariants(t, p.ID())
	f.assertInvariants(t, q.ID())
}

func TestGateLostMidSaleIsRebuiltByItself(t *testing.T) {
	var g *memory.Gate
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { g = m; return m }),
		withConfig(func(c *application.Config) { c.RebuildDelay = 10 * time.Millisecond }))
	p := f.createProduct(t, 3, 10)
	key := f.newKey()
	first, err := f.place("alice", p.ID(), 2, key)
	is(t, "place before the loss", err, nil)
	f.mustPay(t, first.Order.No())
	pending := f.mustPlace(t, "bob", p.ID(), 3)

	g.Flush()
	_, err = f.place("carol", p.ID(), 1, f.newKey())
	is(t, "place while the gate has lost the product", err, domain.ErrGateNotReady)
	f.shop.WaitBackground()

	lv := f.levels(t, p.ID())
	if lv.Stock != 5 || lv.Sold != 5 {
		t.Fatalf("rebuilt gate %+v, want stock 5 sold 5 (2 paid + 3 pending of 10)", lv)
	}
	again, err := f.place("alice", p.ID(), 2, key)
	is(t, "replay after the loss", err, nil)
	if !again.Replayed || again.Order.No() != first.Order.No() {
		t.Fatalf("replay after the loss gave %s (replayed %v), want the original %s", again.Order.No(), again.Replayed, first.Order.No())
	}
	f.mustPlace(t, "carol", p.ID(), 3)
	f.mustPay(t, pending.No())
	if f.alertCount("gate_rebuilt") != 1 {
		t.Fatalf("gate_rebuilt alerts: %d, want 1", f.alertCount("gate_rebuilt"))
	}
	f.assertInvariants(t, p.ID())
}

// unreachableGate fails every reservation at once and stalls every cancel until its context
// ends, as a gate whose network was cut while a give-back retries.
type unreachableGate struct {
	domain.StockGate
	cancels atomic.Int32
}

func (g *unreachableGate) Reserve(context.Context, domain.Reservation) (domain.ReserveResult, error) {
	return domain.ReserveResult{}, fmt.Errorf("dial redis: %w", domain.ErrUnavailable)
}

func (g *unreachableGate) Cancel(ctx context.Context, _ domain.Reservation) (bool, error) {
	g.cancels.Add(1)
	<-ctx.Done()
	return false, fmt.Errorf("cancel: %w: %w", domain.ErrUnavailable, ctx.Err())
}

// The give-back of a reservation of unknown outcome ends by the request's deadline: a gate
// that cannot be reached does not keep the buyer past it (the orphan sweep settles the rest).
func TestPlaceOrderWithAnUnreachableGateAnswersByItsDeadline(t *testing.T) {
	g := &unreachableGate{}
	f := newFixture(t, withGate(func(m *memory.Gate) domain.StockGate { g.StockGate = m; return g }))
	p := f.createProduct(t, 3, 5)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := f.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: "alice", Product: p.ID(), Qty: 1, IdempotencyKey: f.newKey()})
	took := time.Since(began)
	is(t, "place with the gate unreachable", err, domain.ErrUnavailable)
	if g.cancels.Load() != 1 || took > time.Second {
		t.Fatalf("%d give-backs tried, answered after %s; want one, ended by the 200ms deadline", g.cancels.Load(), took)
	}
}
