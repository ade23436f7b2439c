package historytest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cardshop/domain"
)

// reconcileAll runs Reconcile without repair for every product: its checks are the invariants
// of docs/PRODUCT.md (gate stock + sold = live codes, gate sold = qty of PENDING and PAID
// orders, codes SOLD = qty of PAID orders, and the flow sums).
func (h *history) reconcileAll(ctx context.Context) []string {
	var v []string
	for i, p := range h.products {
		rep, err := h.shop.Catalogue.Reconcile(ctx, p.id, false)
		if err != nil {
			v = append(v, fmt.Sprintf("product %d (#%d): reconcile: %v", p.id, i, err))
			continue
		}
		for _, c := range rep.Checks {
			if !c.OK {
				v = append(v, fmt.Sprintf("product %d (#%d): %q: want %d, got %d", p.id, i, c.Name, c.Want, c.Got))
			}
		}
		if !rep.OK() {
			v = append(v, fmt.Sprintf("product %d (#%d): gate %+v, cards %v, flow %+v", p.id, i, rep.Gate, rep.Cards, rep.Flow))
		}
	}
	return v
}

// orderFacts is what the ledger says about one order.
type orderFacts struct {
	rec     *orderRec
	order   domain.Order
	cards   []domain.Card
	flows   []domain.FlowEntry
	byKey   domain.OrderNo
	mails   int // a guest order's e-mail messages in the outbox
	loadErr error
}

// checkOrders checks the orders the history placed: the codes each holds (no code delivered to
// two orders), its flow rows, its delivery event, that an accepted payment ended PAID,
// REFUNDED or UNFULFILLED with an alert, that its key finds it, and that the ledger holds no
// order no buyer was answered. Unless all is set, only the orders that may have changed since
// the last checkpoint are read again: those an operation touched, those still PENDING (a
// timeout or a payment may end them) and those UNFULFILLED (any import into their product may
// fill them, oldest first, without naming them).
func (h *history) checkOrders(ctx context.Context, all bool) []string {
	var recs []*orderRec
	everything := h.snapshot()
	for _, r := range everything {
		if all || r.dirty.Swap(false) || r.checked == domain.StatusPending || r.checked == domain.StatusUnfulfilled {
			recs = append(recs, r)
		}
	}
	facts := make([]orderFacts, len(recs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				facts[i] = h.loadFacts(ctx, recs[i])
			}
		})
	}
	for i := range recs {
		next <- i
	}
	close(next)
	wg.Wait()

	// The codes the re-read orders held before leave the register first: a refunded order's
	// recycled code may have been sold again since.
	for _, r := range recs {
		for _, row := range r.rows {
			if h.codeOwner[row] == r.no {
				delete(h.codeOwner, row)
			}
		}
		r.codes, r.rows = nil, nil
	}
	var v []string
	for _, f := range facts {
		r := f.rec
		if f.loadErr != nil {
			v = append(v, fmt.Sprintf("order %s: %v", r.no, f.loadErr))
			continue
		}
		o := f.order
		r.see(o)
		st := o.Status()
		r.checked = st

		if f.byKey != r.no {
			v = append(v, fmt.Sprintf("order %s: its buyer's key %s finds order %q", r.no, r.key, f.byKey))
		}
		want := 0
		if st == domain.StatusPaid {
			want = o.Qty()
		}
		if len(f.cards) != want {
			v = append(v, fmt.Sprintf("order %s (%s, qty %d) holds %d codes, want %d", r.no, st, o.Qty(), len(f.cards), want))
		}
		v = append(v, h.checkCouponOrder(o)...)
		seenCodes := map[string]bool{}
		for _, c := range f.cards {
			if c.Status != domain.CardSold || c.OrderNo != r.no || c.ProductID != o.Product() {
				v = append(v, fmt.Sprintf("order %s: card %d is %s for order %s of product %d", r.no, c.ID, c.Status, c.OrderNo, c.ProductID))
			}
			// Each row is one use of a code (one row per code on a single-use product): no use is
			// delivered to two orders, and no order gets one code twice.
			if other, dup := h.codeOwner[c.ID]; dup {
				v = append(v, fmt.Sprintf("a code's use (card %d) is delivered to both %s and %s", c.ID, other, r.no))
			}
			code := c.Code.Reveal()
			if seenCodes[code] {
				v = append(v, fmt.Sprintf("order %s holds one code twice (card %d)", r.no, c.ID))
			}
			seenCodes[code] = true
			h.codeOwner[c.ID] = r.no
			r.codes, r.rows = append(r.codes, code), append(r.rows, c.ID)
		}

		// The order's own flow rows explain what it holds.
		byType := make(map[domain.FlowType]int64)
		for _, e := range f.flows {
			if e.ProductID != o.Product() || e.Qty != int64(o.Qty()) {
				v = append(v, fmt.Sprintf("order %s: flow row %s has product %d qty %d", r.no, e.Type, e.ProductID, e.Qty))
			}
			byType[e.Type]++
		}
		held := byType[domain.FlowReserve] + byType[domain.FlowLateReserve] - byType[domain.FlowTimeoutRestore] -
			byType[domain.FlowFailedRestore] - byType[domain.FlowUnfulfilled] - byType[domain.FlowRefundRestore] -
			byType[domain.FlowRefundVoid]
		holds := byType[domain.FlowPay] - byType[domain.FlowRefundRestore] - byType[domain.FlowRefundVoid]
		// A guest order that was ever PAID (its pay row) recorded exactly one e-mail; one that
		// never was (still unpaid, closed, failed, unfulfilled) none.
		if wantMails := min(byType[domain.FlowPay], 1); o.IsGuest() && int64(f.mails) != wantMails {
			v = append(v, fmt.Sprintf("guest order %s (%s): %d e-mail messages, want %d", r.no, st, f.mails, wantMails))
		}
		var wantHeld, wantHolds int64
		if st.HoldsStock() {
			wantHeld = 1
		}
		if st == domain.StatusPaid {
			wantHolds = 1
		}
		if held != wantHeld || holds != wantHolds || byType[domain.FlowReserve] != 1 {
			v = append(v, fmt.Sprintf("order %s is %s but its flow rows %v hold %d reservations and %d allocations", r.no, st, byType, held, holds))
		}

		// Paid means delivered: an event once the payment is recorded, none without one.
		if pub := h.pub.count(r.no); (byType[domain.FlowPay] > 0) != (pub > 0) {
			v = append(v, fmt.Sprintf("order %s (%s) has %d pay rows and %d published delivery events", r.no, st, byType[domain.FlowPay], pub))
		}
		if st == domain.StatusUnfulfilled && !h.alerts.has(r.no, "paid_unfulfilled") {
			v = append(v, fmt.Sprintf("order %s is UNFULFILLED without a paid_unfulfilled alert", r.no))
		}
		if (st == domain.StatusPaid || st == domain.StatusUnfulfilled) && o.PaidAt().IsZero() {
			v = append(v, fmt.Sprintf("order %s is %s without a payment time", r.no, st))
		}
		if r.accepted.Load() && st != domain.StatusPaid && st != domain.StatusRefunded && st != domain.StatusUnfulfilled {
			v = append(v, fmt.Sprintf("order %s: a payment was accepted, yet the order is %s", r.no, st))
		}
		v = append(v, h.checkMoney(o, r)...)
		v = append(v, h.checkRefund(o, r, byType)...)
		v = append(v, h.checkWindow(o, r, byType)...)
	}
	v = append(v, h.checkBuyerLimits(everything)...)

	// The gate promising codes the pool does not have is a defect: nothing here injects faults.
	if n := h.alerts.kinds()["stock_inconsistency"]; n > 0 {
		v = append(v, fmt.Sprintf("%d stock_inconsistency alerts: a payment found the pool short of what the gate had reserved", n))
	}
	seen := make(map[domain.ProductID]map[domain.OrderStatus]domain.StatusTotal)
	for _, r := range everything {
		if seen[r.product] == nil {
			seen[r.product] = make(map[domain.OrderStatus]domain.StatusTotal)
		}
		tot := seen[r.product][r.checked]
		tot.Orders++
		tot.Qty += int64(r.qty)
		seen[r.product][r.checked] = tot
	}
	for _, p := range h.products {
		totals, err := h.ports.Ledger.Orders().Totals(ctx, p.id)
		if err != nil {
			v = append(v, fmt.Sprintf("product %d: order totals: %v", p.id, err))
			continue
		}
		for _, st := range domain.AllOrderStatuses {
			if totals[st] != seen[p.id][st] {
				v = append(v, fmt.Sprintf("product %d: %s orders: the buyers were answered %+v, the ledger holds %+v", p.id, st, seen[p.id][st], totals[st]))
			}
		}
	}
	return v
}

func (h *history) loadFacts(ctx context.Context, r *orderRec) orderFacts {
	f := orderFacts{rec: r}
	l := h.ports.Ledger
	if f.order, f.loadErr = l.Orders().Order(ctx, r.no); f.loadErr != nil {
		return f
	}
	if f.cards, f.loadErr = l.Cards().Cards(ctx, r.no); f.loadErr != nil {
		return f
	}
	if f.flows, f.loadErr = l.Flows().Entries(ctx, string(r.no)); f.loadErr != nil {
		return f
	}
	byKey, err := l.Orders().OrderByKey(ctx, r.buyer, domain.IdempotencyKey(r.key))
	if err != nil {
		f.loadErr = fmt.Errorf("order by key %s: %w", r.key, err)
		return f
	}
	f.byKey = byKey.No()
	if f.order.IsGuest() {
		mails, err := l.Outbox().ByKey(ctx, string(r.no), domain.TopicOrderMail)
		if err != nil {
			f.loadErr = fmt.Errorf("mail messages: %w", err)
			return f
		}
		f.mails = len(mails)
	}
	return f
}

// windowMargin is how far past a sale's end a payment must have been sent for the check of the
// sale window to judge it: the shop reads another clock (the gate's) a moment later.
const windowMargin = 10 * time.Millisecond

// checkMoney checks the providers' own ledgers of the order's payments: no payment refunded
// twice, nothing paid out that was not received, and a REFUNDED order's money returned by the
// provider that took it.
func (h *history) checkMoney(o domain.Order, r *orderRec) []string {
	var v []string
	for _, f := range []*fakeProvider{h.hpay, h.epay} {
		m, ok := f.money(r.no)
		if !ok {
			continue
		}
		if m.payouts > 1 {
			v = append(v, fmt.Sprintf("payout twice: order %s (%s): %s paid out %d refunds of its one payment", r.no, o.Status(), f.name, m.payouts))
		}
		if m.payouts > m.received {
			v = append(v, fmt.Sprintf("payout beyond receipts: order %s (%s): %s paid out %d refunds of %d payments received", r.no, o.Status(), f.name, m.payouts, m.received))
		}
		if o.Status() == domain.StatusRefunded && strings.HasPrefix(o.PaymentRef(), string(f.name)+":") && m.payouts == 0 {
			v = append(v, fmt.Sprintf("refund without payout: order %s is REFUNDED, yet %s, which took its money, returned none", r.no, f.name))
		}
	}
	return v
}

// checkRefund checks a REFUNDED order against the operator's decision: codes voided when asked,
// recycled when asked, never recycled once revealed unless the operator vouched for them, and
// the operator's reason kept.
func (h *history) checkRefund(o domain.Order, r *orderRec, byType map[domain.FlowType]int64) []string {
	if o.Status() != domain.StatusRefunded {
		return nil
	}
	d, ok := h.decisionOf(r)
	if !ok {
		return []string{fmt.Sprintf("refund decision: order %s is REFUNDED, yet no operator asked for its refund", r.no)}
	}
	var v []string
	recycled, voided := byType[domain.FlowRefundRestore] > 0, byType[domain.FlowRefundVoid] > 0
	revealed := o.Revealed() || r.revealed.Load()
	switch {
	case recycled && d.void:
		v = append(v, fmt.Sprintf("refund decision: order %s: the operator asked to void its codes, they were RECYCLED", r.no))
	case recycled && revealed && !d.recycle:
		v = append(v, fmt.Sprintf("revealed recycled: order %s: its codes were revealed to the buyer and RECYCLED, the operator asked %s", r.no, d))
	case voided && d.recycle:
		v = append(v, fmt.Sprintf("refund decision: order %s: the operator asked to recycle its codes, they were VOID", r.no))
	}
	if o.Reason() != d.reason {
		v = append(v, fmt.Sprintf("refund reason: order %s: refunded with the reason %q, the operator gave %q", r.no, o.Reason(), d.reason))
	}
	return v
}

// checkWindow checks the sale window's rule for late payments: an order whose payment arrived
// after the product's ends_at, when it no longer held its reservation, gets no codes (it ends
// UNFULFILLED with a paid_unfulfilled alert).
func (h *history) checkWindow(o domain.Order, r *orderRec, byType map[domain.FlowType]int64) []string {
	end := h.products[h.productIndex(r.product)].rules.EndsAt
	first := r.firstPaid.Load()
	if end.IsZero() || first == 0 || o.Status() != domain.StatusPaid || byType[domain.FlowLateReserve] == 0 {
		return nil
	}
	if paid := time.Unix(0, first); !paid.Before(end.Add(windowMargin)) {
		return []string{fmt.Sprintf("sale window: order %s holds codes of product %d for a late payment at %s, %s after the sale ended at %s",
			r.no, r.product, paid.Format(time.TimeOnly+".000"), paid.Sub(end).Round(time.Millisecond), end.Format(time.TimeOnly+".000"))}
	}
	return nil
}

// checkBuyerLimits checks that no buyer holds more codes of a product with a buyer_limit than
// the limit, in PAID orders.
func (h *history) checkBuyerLimits(everything []*orderRec) []string {
	held := map[domain.ProductID]map[string]int{}
	for _, r := range everything {
		if r.checked != domain.StatusPaid {
			continue
		}
		if held[r.product] == nil {
			held[r.product] = map[string]int{}
		}
		held[r.product][string(r.buyer)] += r.qty
	}
	var v []string
	for _, p := range h.products {
		if p.rules.BuyerLimit <= 0 {
			continue
		}
		for _, b := range sortedKeys(held[p.id]) {
			if n := held[p.id][b]; n > p.rules.BuyerLimit {
				v = append(v, fmt.Sprintf("buyer limit: buyer %s holds %d codes of product %d in PAID orders; its buyer_limit is %d", b, n, p.id, p.rules.BuyerLimit))
			}
		}
	}
	return v
}
