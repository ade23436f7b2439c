package application_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"cardshop/application"
	"cardshop/domain"
)

var buyers = []domain.BuyerID{"alice", "bob", "carol"}

// propOrder is the property test's model of one order.
type propOrder struct {
	no        domain.OrderNo
	buyer     domain.BuyerID
	key       string
	qty       int
	placedAt  time.Time
	expiresAt time.Time
	status    domain.OrderStatus // as last seen
	revealed  bool               // its codes were shown (a read with codes of the PAID order)
}

// propRun is one random run over a single product.
type propRun struct {
	f      *fixture
	p      domain.Product
	orders []*propOrder
	codes  []string // every code imported
	// shown maps every card shown by a read to the order it was shown for; an operator's
	// explicit recycle of that order takes its cards out (they may be sold again).
	shown map[int64]domain.OrderNo
}

func (r *propRun) pid() domain.ProductID { return r.p.ID() }

// pick draws one of the orders that satisfy ok, or returns nil if there is none.
func (r *propRun) pick(rt *rapid.T, ok func(*propOrder) bool) *propOrder {
	var cands []*propOrder
	for _, o := range r.orders {
		if ok == nil || ok(o) {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[rapid.IntRange(0, len(cands)-1).Draw(rt, "order")]
}

// pickIn draws an order, mostly one in one of the statuses (if any), sometimes any order.
func (r *propRun) pickIn(rt *rapid.T, statuses ...domain.OrderStatus) *propOrder {
	if rapid.IntRange(0, 3).Draw(rt, "any order") > 0 {
		po := r.pick(rt, func(o *propOrder) bool {
			for _, s := range statuses {
				if o.status == s {
					return true
				}
			}
			return false
		})
		if po != nil {
			return po
		}
	}
	return r.pick(rt, nil)
}

// status reads the order's stored status.
func (r *propRun) status(rt *rapid.T, po *propOrder) domain.OrderStatus {
	return r.f.order(rt, po.no).Status()
}

func (r *propRun) expectStatus(rt *rapid.T, what string, po *propOrder, returned domain.Order, want domain.OrderStatus) {
	rt.Helper()
	got := r.status(rt, po)
	if got != want {
		rt.Fatalf("%s of %s (was %s): stored %s, want %s", what, po.no, po.status, got, want)
	}
	if returned.No() != po.no || returned.Status() != got {
		rt.Fatalf("%s of %s: returned order %s in %s, stored %s", what, po.no, returned.No(), returned.Status(), got)
	}
}

func (r *propRun) expectLevels(rt *rapid.T, what string, want domain.GateLevels) {
	rt.Helper()
	if got := r.f.levels(rt, r.pid()); got != want {
		rt.Fatalf("%s: gate %+v, want %+v", what, got, want)
	}
}

// lateOutcome is what a payment of a CLOSED or FAILED order must end in, given the gate.
func lateOutcome(lv domain.GateLevels, qty int) domain.OrderStatus {
	if !lv.Frozen && lv.Stock >= int64(qty) {
		return domain.StatusPaid
	}
	return domain.StatusUnfulfilled
}

func (r *propRun) place(rt *rapid.T) {
	f := r.f
	buyer := rapid.SampledFrom(buyers).Draw(rt, "buyer")
	qty := rapid.IntRange(1, r.p.MaxPerOrder()).Draw(rt, "qty")
	key := f.newKey()
	before := f.levels(rt, r.pid())
	res, err := f.place(buyer, r.pid(), qty, key)
	switch {
	case before.Frozen:
		is(rt, "place on a frozen product", err, domain.ErrProductFrozen)
	case before.Stock < int64(qty):
		is(rt, fmt.Sprintf("place %d with %d left", qty, before.Stock), err, domain.ErrSoldOut)
	default:
		is(rt, "place", err, nil)
		o, now := res.Order, f.clock.Now()
		if res.Replayed || o.Status() != domain.StatusPending || o.Qty() != qty || o.Buyer() != buyer ||
			string(o.IdempotencyKey()) != key || o.Product() != r.pid() || o.Amount() != testPrice*domain.Money(qty) ||
			!o.ExpiresAt().Equal(now.Add(f.cfg.OrderTimeout)) {
			rt.Fatalf("placed %+v (replayed %v), want a new PENDING order of %d for %s", o.Record(), res.Replayed, qty, buyer)
		}
		r.orders = append(r.orders, &propOrder{no: o.No(), buyer: buyer, key: key, qty: qty, placedAt: now,
			expiresAt: o.ExpiresAt(), status: domain.StatusPending})
		r.expectLevels(rt, "after a reservation", domain.GateLevels{Stock: before.Stock - int64(qty), Sold: before.Sold + int64(qty)})
		return
	}
	r.expectLevels(rt, "after a refused order", before)
}

func (r *propRun) placeInvalid(rt *rapid.T) {
	f := r.f
	before := f.levels(rt, r.pid())
	if rapid.Bool().Draw(rt, "bad key") {
		key := rapid.SampledFrom([]string{"", "short", "has space in it", strings.Repeat("k", 65)}).Draw(rt, "key")
		_, err := f.place("alice", r.pid(), 1, key)
		is(rt, "place with a bad key", err, domain.ErrInvalidIdempotencyKey)
	} else {
		qty := rapid.SampledFrom([]int{0, -1, r.p.MaxPerOrder() + 1}).Draw(rt, "bad qty")
		_, err := f.place("alice", r.pid(), qty, f.newKey())
		is(rt, "place with a bad qty", err, domain.ErrQtyOutOfRange)
	}
	r.expectLevels(rt, "after an invalid order", before)
}

// replay submits an earlier key again, with the same body or a different qty.
func (r *propRun) replay(rt *rapid.T) {
	f := r.f
	po := r.pick(rt, nil)
	if po == nil {
		return
	}
	limit := r.p.MaxPerOrder()
	same := limit == 1 || rapid.Bool().Draw(rt, "same body")
	qty := po.qty
	if !same {
		qty = rapid.IntRange(1, limit-1).Draw(rt, "other qty")
		if qty >= po.qty {
			qty++
		}
	}
	before := f.levels(rt, r.pid())
	// Once the gate has forgotten the key (IdempotencyTTL), the replay must reserve again to
	// reach the ledger's unique (buyer, key); a frozen or sold-out gate answers first.
	forgotten := !f.clock.Now().Before(po.placedAt.Add(f.cfg.IdempotencyTTL))
	res, err := f.place(po.buyer, r.pid(), qty, po.key)
	refusedFirst := forgotten && (before.Frozen || before.Stock < int64(qty))
	switch {
	case refusedFirst && (errors.Is(err, domain.ErrProductFrozen) || errors.Is(err, domain.ErrSoldOut)):
		// Known gap (see the report): once the gate has forgotten the key, a frozen or sold-out
		// gate answers before the ledger's (buyer, key) is consulted. Accepted here, not required:
		// answering the original order (below) is what a buyer expects.
		if before.Frozen {
			is(rt, "replay after the gate forgot the key, frozen", err, domain.ErrProductFrozen)
		} else {
			is(rt, "replay after the gate forgot the key, sold out", err, domain.ErrSoldOut)
		}
	case same:
		is(rt, "replay", err, nil)
		if !res.Replayed || res.Order.No() != po.no {
			rt.Fatalf("replay of %s answered %s (replayed %v)", po.no, res.Order.No(), res.Replayed)
		}
	default:
		is(rt, "key reused with another qty", err, domain.ErrIdempotencyMismatch)
	}
	r.expectLevels(rt, "after a replay", before)
}

// payVia pays (or fails) the order through ApplyPayment or a signed callback.
// waiter is a waiting (UNFULFILLED) order as the fill model sees it.
type waiter struct {
	no     domain.OrderNo
	qty    int
	paidAt time.Time
}

// waiting lists the orders stored UNFULFILLED now.
func (r *propRun) waiting(rt *rapid.T) []waiter {
	var ws []waiter
	for _, po := range r.orders {
		if o := r.f.order(rt, po.no); o.Status() == domain.StatusUnfulfilled {
			ws = append(ws, waiter{no: o.No(), qty: o.Qty(), paidAt: o.PaidAt()})
		}
	}
	return ws
}

// fillModel predicts a fill of the waiting orders ws from stock units: oldest payment first
// (then by number), each whole, stopping at the first that does not fit; none on a frozen
// product. It returns the orders filled and the units they take.
func fillModel(ws []waiter, stock int64, frozen bool) (filled []domain.OrderNo, units int64) {
	slices.SortFunc(ws, func(a, b waiter) int {
		if c := a.paidAt.Compare(b.paidAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.no), string(b.no))
	})
	if frozen {
		return nil, 0
	}
	for _, w := range ws {
		if int64(w.qty) > stock-units {
			break
		}
		units += int64(w.qty)
		filled = append(filled, w.no)
	}
	return filled, units
}

// expectFill checks that exactly the orders of ws the model filled are PAID, the others
// still UNFULFILLED.
func (r *propRun) expectFill(rt *rapid.T, what string, ws []waiter, filled []domain.OrderNo) {
	rt.Helper()
	for _, w := range ws {
		want := domain.StatusUnfulfilled
		if slices.Contains(filled, w.no) {
			want = domain.StatusPaid
		}
		if got := r.f.order(rt, w.no).Status(); got != want {
			rt.Fatalf("%s: waiting order %s (qty %d) is %s, want %s (filled oldest first: %v)", what, w.no, w.qty, got, want, filled)
		}
	}
}

func (r *propRun) payVia(rt *rapid.T, po *propOrder, paid bool, amount domain.Money) (domain.Order, error) {
	f := r.f
	if rapid.Bool().Draw(rt, "via callback") {
		status := "paid"
		if !paid {
			status = "failed"
		}
		return f.shop.Payments.HandlePaymentCallback(f.ctx, f.callbackFor(rt, f.order(rt, po.no), status, amount))
	}
	return f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: po.no, Paid: paid, Amount: amount,
		PaymentRef: "pay-" + string(po.no)})
}

func (r *propRun) payOrder(rt *rapid.T, po *propOrder) {
	f := r.f
	o := f.order(rt, po.no)
	lv := f.levels(rt, r.pid())
	ws := r.waiting(rt)
	got, err := r.payVia(rt, po, true, o.Amount())
	is(rt, "pay "+o.Status().String(), err, nil)
	want := o.Status()
	switch o.Status() {
	case domain.StatusPending:
		want = domain.StatusPaid
	case domain.StatusClosed, domain.StatusFailed:
		want = lateOutcome(lv, po.qty)
	default: // settled already: want stays
	}
	r.expectStatus(rt, "payment", po, got, want)
	if want == domain.StatusUnfulfilled && o.Status() != domain.StatusUnfulfilled {
		// Without stock for it, the late payment fills the older waiting orders the stock
		// covers (stock that came back without an import: an expiry, a refund's recycle).
		ws = append(ws, waiter{no: po.no, qty: po.qty, paidAt: got.PaidAt()})
		filled, units := fillModel(ws, lv.Stock, lv.Frozen)
		r.expectFill(rt, "the fill after an unfulfilled late payment", ws, filled)
		r.expectLevels(rt, "after an unfulfilled late payment", domain.GateLevels{Stock: lv.Stock - units, Sold: lv.Sold + units, Frozen: lv.Frozen})
	}
}

func (r *propRun) pay(rt *rapid.T) {
	if po := r.pickIn(rt, domain.StatusPending); po != nil {
		r.payOrder(rt, po)
	}
}

func (r *propRun) latePay(rt *rapid.T) {
	po := r.pick(rt, func(o *propOrder) bool {
		return o.status == domain.StatusClosed || o.status == domain.StatusFailed
	})
	if po != nil {
		r.payOrder(rt, po)
	}
}

func (r *propRun) payTwice(rt *rapid.T) {
	po := r.pickIn(rt, domain.StatusPending, domain.StatusClosed, domain.StatusFailed)
	if po == nil {
		return
	}
	r.payOrder(rt, po)
	f := r.f
	first := f.order(rt, po.no)
	lv, counts := f.levels(rt, r.pid()), f.counts(rt, r.pid())
	got, err := r.payVia(rt, po, true, first.Amount())
	is(rt, "repeated payment", err, nil)
	r.expectStatus(rt, "repeated payment", po, got, first.Status())
	r.expectLevels(rt, "after a repeated payment", lv)
	if c := f.counts(rt, r.pid()); fmt.Sprint(c) != fmt.Sprint(counts) {
		rt.Fatalf("repeated payment changed the pool: %v -> %v", counts, c)
	}
}

func (r *propRun) payWrongAmount(rt *rapid.T) {
	f := r.f
	po := r.pick(rt, nil)
	if po == nil {
		return
	}
	o := f.order(rt, po.no)
	delta := domain.Money(rapid.IntRange(1, 1000).Draw(rt, "delta"))
	if rapid.Bool().Draw(rt, "underpaid") {
		delta = -delta
	}
	lv, alerts := f.levels(rt, r.pid()), f.alertCount("amount_mismatch")
	_, err := r.payVia(rt, po, true, o.Amount()+delta)
	is(rt, "payment of the wrong amount", err, domain.ErrAmountMismatch)
	if stored := f.order(rt, po.no); stored.Status() != o.Status() || stored.UpdatedAt() != o.UpdatedAt() {
		rt.Fatalf("a wrong amount changed order %s: %s -> %s", po.no, o.Status(), stored.Status())
	}
	r.expectLevels(rt, "after a wrong amount", lv)
	if f.alertCount("amount_mismatch") != alerts+1 {
		rt.Fatalf("a wrong amount raised no amount_mismatch alert")
	}
}

func (r *propRun) payFailed(rt *rapid.T) {
	f := r.f
	po := r.pickIn(rt, domain.StatusPending)
	if po == nil {
		return
	}
	o := f.order(rt, po.no)
	lv := f.levels(rt, r.pid())
	got, err := r.payVia(rt, po, false, o.Amount())
	is(rt, "payment failed", err, nil)
	if o.Status() != domain.StatusPending {
		r.expectStatus(rt, "late failure notice", po, got, o.Status())
		r.expectLevels(rt, "after a stale failure notice", lv)
		return
	}
	r.expectStatus(rt, "payment failed", po, got, domain.StatusFailed)
	q := int64(po.qty)
	r.expectLevels(rt, "after a failed payment", domain.GateLevels{Stock: lv.Stock + q, Sold: lv.Sold - q, Frozen: lv.Frozen})
	if ft := f.flowTypes(rt, po.no); ft[domain.FlowFailedRestore] != 1 {
		rt.Fatalf("failed payment of %s wrote flow %v", po.no, ft)
	}
}

// expire moves the clock past an order's expiry and delivers its timeout.
func (r *propRun) expire(rt *rapid.T) {
	f := r.f
	po := r.pickIn(rt, domain.StatusPending)
	if po == nil {
		return
	}
	if f.clock.Now().Before(po.expiresAt) {
		f.clock.Set(po.expiresAt.Add(time.Duration(rapid.IntRange(0, 120).Draw(rt, "late by s")) * time.Second))
	}
	o := f.order(rt, po.no)
	lv := f.levels(rt, r.pid())
	is(rt, "close expired", f.shop.Sales.CloseExpired(f.ctx, po.no), nil)
	if o.Status() != domain.StatusPending {
		r.expectStatus(rt, "redelivered timeout", po, o, o.Status())
		r.expectLevels(rt, "after a redelivered timeout", lv)
		return
	}
	r.expectStatus(rt, "timeout", po, f.order(rt, po.no), domain.StatusClosed)
	q := int64(po.qty)
	r.expectLevels(rt, "after a timeout", domain.GateLevels{Stock: lv.Stock + q, Sold: lv.Sold - q, Frozen: lv.Frozen})
}

// closeEarly delivers a timeout before the order is due: nothing changes.
func (r *propRun) closeEarly(rt *rapid.T) {
	f := r.f
	now := f.clock.Now()
	po := r.pick(rt, func(o *propOrder) bool { return o.status == domain.StatusPending && now.Before(o.expiresAt) })
	if po == nil {
		return
	}
	lv := f.levels(rt, r.pid())
	is(rt, "early timeout", f.shop.Sales.CloseExpired(f.ctx, po.no), nil)
	r.expectStatus(rt, "early timeout", po, f.order(rt, po.no), domain.StatusPending)
	r.expectLevels(rt, "after an early timeout", lv)
}

func (r *propRun) advance(rt *rapid.T) {
	r.f.clock.Advance(time.Duration(rapid.IntRange(0, 20*60).Draw(rt, "advance s")) * time.Second)
}

func (r *propRun) sweep(rt *rapid.T) {
	f := r.f
	now := f.clock.Now()
	var due []*propOrder
	for _, po := range r.orders {
		if po.status == domain.StatusPending && !now.Before(po.expiresAt) {
			due = append(due, po)
		}
	}
	lv, ws := f.levels(rt, r.pid()), r.waiting(rt)
	freed := int64(0)
	for _, po := range due {
		freed += int64(po.qty)
	}
	filled, _ := fillModel(ws, lv.Stock+freed, lv.Frozen)
	n, err := f.shop.Sales.Sweep(f.ctx)
	is(rt, "sweep", err, nil)
	if n != len(due)+len(filled) {
		rt.Fatalf("sweep looked at %d orders, %d were due and %d waiting orders to fill", n, len(due), len(filled))
	}
	r.expectFill(rt, "the sweep's fill", ws, filled)
	for _, po := range due {
		if st := r.status(rt, po); st != domain.StatusClosed {
			rt.Fatalf("sweep left due order %s %s", po.no, st)
		}
	}
	f.assertNoExpiredPending(rt)
}

// read reads an order as its buyer or an operator does, with or without codes: a read with
// codes of a PAID order shows them and records the first reveal; nothing else does.
func (r *propRun) read(rt *rapid.T) {
	f := r.f
	po := r.pickIn(rt, domain.StatusPaid)
	if po == nil {
		return
	}
	o := f.order(rt, po.no)
	var v application.OrderView
	var err error
	withCodes := true
	switch rapid.IntRange(0, 2).Draw(rt, "reader") {
	case 0:
		v, err = f.shop.Sales.BuyerOrder(f.ctx, po.buyer, po.no)
	case 1:
		v, err = f.shop.Sales.AdminOrderCodes(f.ctx, po.no, opReader)
	default:
		withCodes = false
		v, err = f.shop.Sales.AdminOrder(f.ctx, po.no)
	}
	is(rt, "read", err, nil)
	stored := f.order(rt, po.no)
	if !withCodes || o.Status() != domain.StatusPaid {
		if len(v.Cards) != 0 || !stored.RevealedAt().Equal(o.RevealedAt()) {
			rt.Fatalf("read of %s order %s (codes %v): %d codes, revealed %v -> %v; want none, unchanged",
				o.Status(), po.no, withCodes, len(v.Cards), o.RevealedAt(), stored.RevealedAt())
		}
		return
	}
	want := o.RevealedAt()
	if !o.Revealed() {
		want = f.clock.Now()
	}
	if len(v.Cards) != po.qty || !stored.RevealedAt().Equal(want) || !v.Order.RevealedAt().Equal(want) {
		rt.Fatalf("read of PAID order %s: %d codes, revealed at %v (answered %v); want %d codes, revealed at %v",
			po.no, len(v.Cards), stored.RevealedAt(), v.Order.RevealedAt(), po.qty, want)
	}
	po.revealed = true
	for _, c := range v.Cards {
		if other, ok := r.shown[c.ID]; ok && other != po.no {
			rt.Fatalf("card %d shown for %s is shown again for %s", c.ID, other, po.no)
		}
		r.shown[c.ID] = po.no
	}
}

// checkShownNeverResold checks that no card shown for one order is SOLD to another.
func (r *propRun) checkShownNeverResold(rt *rapid.T) {
	for _, po := range r.orders {
		for _, c := range r.f.soldCards(rt, po.no) {
			if other, ok := r.shown[c.ID]; ok && other != po.no {
				rt.Fatalf("card %d, shown for %s, is sold again to %s", c.ID, other, po.no)
			}
		}
	}
}

func (r *propRun) refund(rt *rapid.T) {
	f := r.f
	po := r.pickIn(rt, domain.StatusPaid, domain.StatusUnfulfilled)
	if po == nil {
		return
	}
	cmd := application.Refund{OrderNo: po.no}
	switch rapid.IntRange(0, 3).Draw(rt, "refund flags") {
	case 1:
		cmd.Void = true
	case 2:
		cmd.Recycle = true
	case 3:
		cmd.Void, cmd.Recycle = true, true
	}
	o := f.order(rt, po.no)
	lv, counts := f.levels(rt, r.pid()), f.counts(rt, r.pid())
	held := f.soldCards(rt, po.no)
	got, err := f.shop.Payments.RefundOrder(f.ctx, cmd)
	q := int64(po.qty)
	if cmd.Void && cmd.Recycle {
		is(rt, "refund with void and recycle", err, domain.ErrInvalidInput)
		r.expectStatus(rt, "refused refund", po, o, o.Status())
		r.expectLevels(rt, "after a refused refund", lv)
		return
	}
	switch o.Status() {
	case domain.StatusPaid:
		is(rt, "refund", err, nil)
		r.expectStatus(rt, "refund", po, got.Order, domain.StatusRefunded)
		if o.Revealed() != po.revealed {
			rt.Fatalf("order %s: stored revealed %v, but the run revealed it: %v", po.no, o.Revealed(), po.revealed)
		}
		void := cmd.Void || (o.Revealed() && !cmd.Recycle)
		c := f.counts(rt, r.pid())
		to, wantLv := domain.CardRecycled, domain.GateLevels{Stock: lv.Stock + q, Sold: lv.Sold - q, Frozen: lv.Frozen}
		recycled, voided := po.qty, 0
		if void {
			to, wantLv = domain.CardVoid, domain.GateLevels{Stock: lv.Stock, Sold: lv.Sold - q, Frozen: lv.Frozen}
			recycled, voided = 0, po.qty
		}
		if c[domain.CardSold] != counts[domain.CardSold]-q || c[to] != counts[to]+q {
			rt.Fatalf("refund (%+v, revealed %v) of %d codes: pool %v -> %v", cmd, o.Revealed(), q, counts, c)
		}
		if got.Recycled != recycled || got.Voided != voided {
			rt.Fatalf("refund (%+v, revealed %v) answered recycled %d, voided %d; want %d, %d",
				cmd, o.Revealed(), got.Recycled, got.Voided, recycled, voided)
		}
		if !void {
			for _, c := range held { // the operator vouches these may be sold again
				delete(r.shown, c.ID)
			}
		}
		r.expectLevels(rt, "after a refund", wantLv)
		return
	case domain.StatusUnfulfilled, domain.StatusRefunded:
		is(rt, "refund "+o.Status().String(), err, nil)
		r.expectStatus(rt, "refund", po, got.Order, domain.StatusRefunded)
		if o.Status() == domain.StatusUnfulfilled && (got.Recycled != 0 || got.Voided != 0) {
			rt.Fatalf("refund of an UNFULFILLED order answered recycled %d, voided %d", got.Recycled, got.Voided)
		}
	default:
		is(rt, "refund "+o.Status().String(), err, domain.ErrInvalidTransition)
		r.expectStatus(rt, "refused refund", po, o, o.Status())
	}
	r.expectLevels(rt, "after a refund that moved no codes", lv)
}

func (r *propRun) fulfil(rt *rapid.T) {
	f := r.f
	po := r.pickIn(rt, domain.StatusUnfulfilled)
	if po == nil {
		return
	}
	o := f.order(rt, po.no)
	lv := f.levels(rt, r.pid())
	got, err := f.shop.Sales.FulfilOrder(f.ctx, po.no)
	if o.Status() != domain.StatusUnfulfilled {
		is(rt, "fulfil "+o.Status().String(), err, domain.ErrInvalidTransition)
		r.expectStatus(rt, "refused fulfil", po, f.order(rt, po.no), o.Status())
		r.expectLevels(rt, "after a refused fulfil", lv)
		return
	}
	if lateOutcome(lv, po.qty) == domain.StatusPaid {
		is(rt, "fulfil", err, nil)
		r.expectStatus(rt, "fulfil", po, got, domain.StatusPaid)
		return
	}
	if lv.Frozen {
		is(rt, "fulfil of a frozen product", err, domain.ErrProductFrozen)
	} else {
		is(rt, "fulfil without stock", err, domain.ErrSoldOut)
	}
	r.expectStatus(rt, "fulfil without stock", po, f.order(rt, po.no), domain.StatusUnfulfilled)
	r.expectLevels(rt, "after a fulfil without stock", lv)
}

// importMore imports fresh codes mixed with codes the product has, a code repeated within
// the batch, CSV lines and malformed lines.
func (r *propRun) importMore(rt *rapid.T) {
	f := r.f
	fresh := f.newCodes(rapid.IntRange(0, 8).Draw(rt, "fresh"))
	var lines []string
	for _, c := range fresh {
		if rapid.Bool().Draw(rt, "csv") {
			c += ",note"
		}
		lines = append(lines, c)
	}
	dups := 0
	if len(r.codes) > 0 {
		dups = rapid.IntRange(0, min(3, len(r.codes))).Draw(rt, "old codes")
		for i := 0; i < dups; i++ {
			lines = append(lines, r.codes[rapid.IntRange(0, len(r.codes)-1).Draw(rt, "old code")])
		}
	}
	if len(fresh) > 0 && rapid.Bool().Draw(rt, "repeat within batch") {
		lines = append(lines, fresh[0])
		dups++
	}
	invalid := 0
	if rapid.Bool().Draw(rt, "malformed line") {
		lines = append(lines, "x")
		invalid++
	}
	lv, ws := f.levels(rt, r.pid()), r.waiting(rt)
	filled, units := fillModel(ws, lv.Stock+int64(len(fresh)), lv.Frozen || len(fresh) == 0)
	rep := f.importLines(rt, r.pid(), strings.Join(lines, "\n"))
	if rep.Added != len(fresh) || rep.Duplicates != dups || rep.Invalid != invalid || rep.Filled != len(filled) {
		rt.Fatalf("import of %d fresh, %d duplicate, %d malformed lines (%d waiting orders to fill) reported %+v",
			len(fresh), dups, invalid, len(filled), rep)
	}
	r.codes = append(r.codes, fresh...)
	r.expectFill(rt, "the import's fill", ws, filled)
	r.expectLevels(rt, "after an import", domain.GateLevels{Stock: lv.Stock + int64(len(fresh)) - units, Sold: lv.Sold + units, Frozen: lv.Frozen})
}

func (r *propRun) freeze(rt *rapid.T) {
	f := r.f
	frozen := rapid.Bool().Draw(rt, "freeze")
	var err error
	if frozen {
		err = f.shop.Catalogue.FreezeProduct(f.ctx, r.pid(), "")
	} else {
		err = f.shop.Catalogue.UnfreezeProduct(f.ctx, r.pid())
	}
	is(rt, "set frozen", err, nil)
	if lv := f.levels(rt, r.pid()); lv.Frozen != frozen {
		rt.Fatalf("gate frozen %v, want %v", lv.Frozen, frozen)
	}
	if p, err := f.shop.Catalogue.Product(f.ctx, r.pid()); err != nil || p.Frozen() != frozen {
		rt.Fatalf("catalogue frozen %v (%v), want %v", p.Frozen(), err, frozen)
	}
}

// checkTransitions checks that every order moved along the state machine since last seen.
func (r *propRun) checkTransitions(rt *rapid.T) {
	for _, po := range r.orders {
		cur := r.status(rt, po)
		if cur != po.status && !domain.CanTransition(po.status, cur) {
			rt.Fatalf("order %s moved %s -> %s, which the state machine forbids", po.no, po.status, cur)
		}
		po.status = cur
		if got := r.f.order(rt, po.no).Revealed(); got != po.revealed {
			rt.Fatalf("order %s: revealed %v, but the run's reads say %v", po.no, got, po.revealed)
		}
	}
}

// TestShopProperties runs random sequences of everything that can happen to one product's
// orders and checks, after every step, each invariant of docs/PRODUCT.md and that every order
// only moved along the state machine.
func TestShopProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(rt)
		limit := rapid.IntRange(1, 3).Draw(rt, "limit")
		r := &propRun{f: f, p: f.createProduct(rt, limit, 0), shown: map[int64]domain.OrderNo{}}
		r.codes = f.addCodes(rt, r.pid(), rapid.IntRange(0, 30).Draw(rt, "codes"))
		f.assertInvariants(rt, r.pid())

		// rapid draws small indices more often, so the common path comes first.
		actions := []struct {
			name string
			do   func(*rapid.T)
		}{
			{"place", r.place}, {"pay", r.pay}, {"replay", r.replay}, {"expire", r.expire},
			{"late pay", r.latePay}, {"refund", r.refund}, {"read", r.read}, {"payment failed", r.payFailed},
			{"sweep", r.sweep}, {"fulfil", r.fulfil}, {"import", r.importMore}, {"pay twice", r.payTwice},
			{"pay wrong amount", r.payWrongAmount}, {"freeze", r.freeze}, {"advance clock", r.advance},
			{"close early", r.closeEarly}, {"place invalid", r.placeInvalid},
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			a := actions[rapid.IntRange(0, len(actions)-1).Draw(rt, "action")]
			rt.Logf("step: %s", a.name)
			a.do(rt)
			f.assertInvariants(rt, r.pid())
			r.checkTransitions(rt)
			r.checkShownNeverResold(rt)
		}
	})
}
