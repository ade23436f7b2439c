package historytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// The operations on payments through the history's providers (providers.go).

// providerBit is the bit of orderRec.payments of a provider.
func providerBit(p domain.Provider) uint32 {
	if p == idemProvider {
		return 1
	}
	return 2
}

func (h *history) providers(r *orderRec) []*fakeProvider {
	var out []*fakeProvider
	for _, f := range []*fakeProvider{h.hpay, h.epay} {
		if r.payments.Load()&providerBit(f.name) != 0 {
			out = append(out, f)
		}
	}
	return out
}

// decide returns the operator's refund decision of the order, drawing it with rng (nil: the
// default) the first time.
func (h *history) decide(r *orderRec, rng *rand.Rand) refundDecision {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.decision == nil {
		d := refundDecision{}
		if rng != nil {
			switch rng.IntN(3) {
			case 1:
				d.void = true
			case 2:
				d.recycle = true
			}
		}
		d.reason = fmt.Sprintf("history %s: %s", r.no, d)
		r.decision = &d
	}
	return *r.decision
}

// decisionOf is the order's refund decision, if one was made.
func (h *history) decisionOf(r *orderRec) (refundDecision, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.decision == nil {
		return refundDecision{}, false
	}
	return *r.decision, true
}

func (h *history) recOf(no domain.OrderNo) *orderRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byNo[no]
}

// refundTaken reports whether a provider of the order has paid out (or accepted, pending) a
// refund of its money: the shop marks the payment REFUNDING before it asks.
func (h *history) refundTaken(r *orderRec) bool {
	for _, f := range h.providers(r) {
		if m, _ := f.money(r.no); m.payouts > 0 {
			return true
		}
	}
	return false
}

// notify delivers a provider's notification k times, at once when concurrent, and summarises
// the answers.
func (w *worker) notify(ctx context.Context, f *fakeProvider, in domain.InboundRequest, k int, concurrent bool) string {
	answers := map[string]int{}
	var mu sync.Mutex
	one := func(int) {
		err := w.h.shop.Payments.HandleNotification(ctx, f.name, in, "127.0.0.1")
		mu.Lock()
		defer mu.Unlock()
		answers[w.outcome("notify", err)]++
	}
	if concurrent {
		parallel(k, one)
	} else {
		for i := range k {
			one(i)
		}
	}
	return summarize(answers)
}

// providerCreate creates a PENDING order's payment at hpay or hepay, or at both. One in three
// of hpay's cannot be closed there (the provider unreachable): its order closes after the
// grace and the payment stays payable, a late payment.
func (w *worker) providerCreate(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPending && !w.due(r) })
	if r == nil {
		return
	}
	var names []domain.Provider
	switch n := w.rng.IntN(20); {
	case n < 9:
		names = []domain.Provider{idemProvider}
	case n < 17:
		names = []domain.Provider{epayProvider}
	default:
		names = []domain.Provider{idemProvider, epayProvider}
	}
	var outs []string
	for _, name := range names {
		p, created, err := w.h.shop.Payments.CreatePayment(ctx, application.NewPayment{Buyer: r.buyer, OrderNo: r.no, Provider: name})
		if err != nil {
			outs = append(outs, string(name)+" "+w.outcome("provider-create", err))
			continue
		}
		r.payments.Or(providerBit(name))
		if name == idemProvider && created && w.rng.IntN(3) == 0 {
			w.h.hpay.failCloses(r.no)
		}
		outs = append(outs, fmt.Sprintf("%s %s created=%v", name, p.Status, created))
	}
	w.log("provider-create", "%s → %s", r.no, strings.Join(outs, ", "))
}

// providerPay has the buyer pay a PENDING order's payment at its provider (at both, sometimes,
// when it has two) and the providers notify, each 1 to 3 times, all at once or in a row.
func (w *worker) providerPay(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool { return r.payments.Load() != 0 && r.status() == domain.StatusPending })
	if r == nil {
		return
	}
	w.payAtProviders(ctx, "provider-pay", r, 1+w.rng.IntN(3))
}

func (w *worker) payAtProviders(ctx context.Context, op string, r *orderRec, k int) {
	fs := w.h.providers(r)
	if len(fs) > 1 && w.rng.IntN(2) == 0 {
		fs = fs[w.rng.IntN(len(fs)):][:1]
	}
	concurrent := w.rng.IntN(2) == 0
	before := r.status()
	var mu sync.Mutex
	var outs []string
	parallel(len(fs), func(i int) {
		f := fs[i]
		now := w.h.ports.Clock.Now()
		paid := f.pay(r.no)
		if paid {
			r.paidNow(now)
		}
		in, ok := f.paidNotice(r.no)
		out := "not payable"
		if ok {
			out = w.notify(ctx, f, in, k, concurrent)
		}
		mu.Lock()
		outs = append(outs, fmt.Sprintf("%s paid=%v ×%d: %s", f.name, paid, k, out))
		mu.Unlock()
	})
	w.log(op, "%s (%s, q%d) → %s", r.no, before, r.qty, strings.Join(outs, "; "))
}

// providerLate pays an expired order's payment that its provider still takes (hepay never
// closes one; hpay could not close some): a CLOSED or FAILED order, or a PENDING one past its
// expiry, closed first. The notice mostly comes several times at once.
func (w *worker) providerLate(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool {
		if r.payments.Load() == 0 {
			return false
		}
		st := r.status()
		return st == domain.StatusClosed || st == domain.StatusFailed || (st == domain.StatusPending && w.due(r))
	})
	if r == nil {
		return
	}
	if r.status() == domain.StatusPending {
		if err := w.h.shop.Sales.CloseExpired(ctx, r.no); err != nil {
			w.outcome("provider-late", err)
		}
	}
	k := 1
	if w.rng.IntN(4) > 0 {
		k = 2 + w.rng.IntN(5)
	}
	w.payAtProviders(ctx, "provider-late", r, k)
}

// providerRefund refunds a PAID or UNFULFILLED order paid through a provider, as the operator
// decided for it, often twice at once (two operators, or a double click).
func (w *worker) providerRefund(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool {
		st := r.status()
		return r.payments.Load() != 0 && (st == domain.StatusPaid || st == domain.StatusUnfulfilled)
	})
	if r == nil {
		return
	}
	d := w.h.decide(r, w.rng)
	k := 1
	if w.rng.IntN(3) > 0 {
		k = 2
	}
	before := r.status()
	answers := map[string]int{}
	var mu sync.Mutex
	parallel(k, func(int) {
		res, err := w.h.shop.Payments.RefundOrder(ctx, application.Refund{OrderNo: r.no, Void: d.void, Recycle: d.recycle, Reason: d.reason})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			answers[w.outcome("provider-refund", err)]++
			return
		}
		r.see(res.Order)
		answers[fmt.Sprintf("%s/%s %s", res.Order.Status(), res.Money.Provider, res.Money.Status)]++
	})
	w.log("provider-refund", "%s (%s) %s ×%d → %s", r.no, before, d, k, summarize(answers))
}

// refundNotify has hpay finish one of its pending refunds and notify, sometimes twice at once.
func (w *worker) refundNotify(ctx context.Context) {
	pending := w.h.hpay.pendingRefunds()
	if len(pending) == 0 {
		return
	}
	pr := pending[w.rng.IntN(len(pending))]
	if r := w.h.recOf(pr.no); r != nil {
		r.dirty.Store(true)
	}
	in, err := w.h.hpay.completeRefund(pr)
	if err != nil {
		return
	}
	k := 1 + w.rng.IntN(2)
	w.log("refund-notify", "%s %s ×%d → %s", pr.no, pr.refundNo, k, w.notify(ctx, w.h.hpay, in, k, true))
}

// reveal reads a PAID order's codes, as its buyer does.
func (w *worker) reveal(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPaid })
	if r == nil {
		return
	}
	v, err := w.h.shop.Sales.AdminOrderCodes(ctx, r.no, application.Reader{Identity: application.Identity{Name: "history", Role: domain.RoleOperator}})
	if err == nil {
		r.see(v.Order)
		if len(v.Cards) > 0 {
			r.revealed.Store(true)
		}
	}
	w.log("reveal", "%s → %s, %d codes, %s", r.no, v.Order.Status(), len(v.Cards), w.outcome("reveal", err))
}

// refundThenFulfil asks hpay for a refund of an UNFULFILLED order it took the money of, which
// hpay answers pending, and then fulfils the order with the codes it needs imported: the
// fulfil must be refused. Without such an order at hand it plays the scenario that makes one
// (one at a time).
func (w *worker) refundThenFulfil(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool {
		return r.status() == domain.StatusUnfulfilled && r.payments.Load()&providerBit(idemProvider) != 0
	})
	if r == nil || w.h.refundTaken(r) {
		if w.h.scenarioBusy.CompareAndSwap(false, true) {
			defer w.h.scenarioBusy.Store(false)
			w.scenarioUnfulfilled(ctx)
		}
		return
	}
	o, err := w.h.ports.Ledger.Orders().Order(ctx, r.no)
	if err != nil || o.Status() != domain.StatusUnfulfilled || !strings.HasPrefix(o.PaymentRef(), string(idemProvider)+":") {
		return
	}
	w.pendingRefundThenFulfil(ctx, "refund-fulfil", r)
}

func (w *worker) pendingRefundThenFulfil(ctx context.Context, op string, r *orderRec) {
	w.h.hpay.pendNext(r.no)
	d := w.h.decide(r, w.rng)
	res, err := w.h.shop.Payments.RefundOrder(ctx, application.Refund{OrderNo: r.no, Void: d.void, Recycle: d.recycle, Reason: d.reason})
	if err != nil || res.Money.Status != domain.PaymentRefunding {
		w.log(op, "%s %s refund → %s %s, %s", r.no, d, res.Order.Status(), res.Money.Status, w.outcome(op, err))
		return
	}
	w.stock(ctx, r)
	o, ferr := w.h.shop.Sales.FulfilOrder(ctx, r.no)
	if ferr == nil {
		r.see(o)
		w.h.violate("fulfil during refund: order %s was fulfilled (%s, codes given) while its refund at %s was pending", r.no, o.Status(), res.Money.Provider)
	}
	w.log(op, "%s %s refund → %s pending; fulfil → %s, %v", r.no, d, res.Money.Provider, o.Status(), ferr)
}

// stock imports the codes an order needs into its product.
func (w *worker) stock(ctx context.Context, r *orderRec) {
	i := w.h.productIndex(r.product)
	codes := w.h.newCodes(i, r.qty)
	if _, err := w.h.shop.Catalogue.ImportCodes(ctx, r.product, strings.NewReader(strings.Join(codes, "\n"))); err != nil {
		w.h.violate("import codes for %s: %v", r.no, err)
		return
	}
	w.h.mu.Lock()
	w.h.codes[r.product] = append(w.h.codes[r.product], codes...)
	w.h.mu.Unlock()
}

// scenarioUnfulfilled makes an UNFULFILLED order paid at hpay on its own product, step by
// step, and runs pendingRefundThenFulfil on it: an order with an hpay payment that hpay cannot
// close expires and closes after the grace; the product is frozen; the buyer pays at hpay and
// the late payment finds the product frozen (UNFULFILLED); the product is unfrozen.
func (w *worker) scenarioUnfulfilled(ctx context.Context) {
	const op = "scenario"
	p := w.h.products[freezeProduct]
	r := &orderRec{product: p.id, qty: 1}
	w.stock(ctx, r)
	key := w.newKey()
	res, err := w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: w.buyer(), Product: p.id, Qty: 1, IdempotencyKey: key})
	if err != nil {
		w.log(op, "place → %s", w.outcome(op, err))
		return
	}
	r = w.h.recordAs(res.Order, key, true)
	defer r.private.Store(false)
	if _, _, err := w.h.shop.Payments.CreatePayment(ctx, application.NewPayment{Buyer: r.buyer, OrderNo: r.no, Provider: idemProvider}); err != nil {
		w.log(op, "%s create payment → %s", r.no, w.outcome(op, err))
		return
	}
	r.payments.Or(providerBit(idemProvider))
	w.h.hpay.failCloses(r.no)
	time.Sleep(time.Until(r.expires.Add(w.h.cfg.PaymentCloseGrace + 20*time.Millisecond)))
	if err := w.h.shop.Sales.CloseExpired(ctx, r.no); err != nil {
		w.log(op, "%s close → %s", r.no, w.outcome(op, err))
		return
	}
	if err := w.h.shop.Catalogue.FreezeProduct(ctx, p.id, "history scenario"); err != nil {
		w.log(op, "%s freeze → %s", r.no, w.outcome(op, err))
		return
	}
	now := w.h.ports.Clock.Now()
	if w.h.hpay.pay(r.no) {
		r.paidNow(now)
	}
	in, ok := w.h.hpay.paidNotice(r.no)
	late := "not payable"
	if ok {
		late = w.notify(ctx, w.h.hpay, in, 1, false)
	}
	if err := w.h.shop.Catalogue.UnfreezeProduct(ctx, p.id); err != nil {
		w.h.violate("scenario: unfreeze %d: %v", p.id, err)
	}
	o, err := w.h.ports.Ledger.Orders().Order(ctx, r.no)
	if err != nil || o.Status() != domain.StatusUnfulfilled {
		w.log(op, "%s late payment %s → %s, %v: no UNFULFILLED order", r.no, late, o.Status(), err)
		return
	}
	r.see(o)
	w.pendingRefundThenFulfil(ctx, op, r)
}

// finishRefunds has hpay finish every pending refund and notify.
func (h *history) finishRefunds(ctx context.Context) {
	for _, pr := range h.hpay.pendingRefunds() {
		if r := h.recOf(pr.no); r != nil {
			r.dirty.Store(true)
		}
		in, err := h.hpay.completeRefund(pr)
		if err != nil {
			continue
		}
		if err := h.shop.Payments.HandleNotification(ctx, idemProvider, in, "127.0.0.1"); err != nil {
			h.violate("settle: hpay's notification that the refund %s of %s succeeded: %v", pr.refundNo, pr.no, err)
		}
	}
}

// windowLate plays the sale window's scenario: before the window product's sale ends it places
// an order there with a payment at hepay and keeps it aside (up to windowStashN); once the sale
// has ended it takes one, closes it, makes sure the product could deliver (codes imported, the
// product unfrozen) and has the buyer pay at hepay, which never closed the payment: a late
// payment after ends_at, whose order must not get codes.
func (w *worker) windowLate(ctx context.Context) {
	const op, windowStashN = "window-late", 8
	p := w.h.products[windowProduct]
	now := w.h.ports.Clock.Now()
	w.h.mu.Lock()
	stashed := len(w.h.windowStash)
	var r *orderRec
	if now.After(p.rules.EndsAt.Add(50*time.Millisecond)) && stashed > 0 {
		r = w.h.windowStash[stashed-1]
		w.h.windowStash = w.h.windowStash[:stashed-1]
	}
	w.h.mu.Unlock()
	if r == nil {
		if stashed >= windowStashN || !now.Before(p.rules.EndsAt.Add(-w.h.cfg.OrderTimeout-200*time.Millisecond)) {
			return
		}
		key := w.newKey()
		res, err := w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: w.buyer(), Product: p.id, Qty: 1, IdempotencyKey: key})
		if err != nil {
			w.log(op, "place → %s", w.outcome(op, err))
			return
		}
		r = w.h.recordAs(res.Order, key, true)
		if _, _, err := w.h.shop.Payments.CreatePayment(ctx, application.NewPayment{Buyer: r.buyer, OrderNo: r.no, Provider: epayProvider}); err != nil {
			r.private.Store(false)
			w.log(op, "%s create payment → %s", r.no, w.outcome(op, err))
			return
		}
		r.payments.Or(providerBit(epayProvider))
		w.h.mu.Lock()
		w.h.windowStash = append(w.h.windowStash, r)
		w.h.mu.Unlock()
		w.log(op, "%s placed before the sale's end, payment at hepay", r.no)
		return
	}
	defer r.private.Store(false)
	r.dirty.Store(true)
	if err := w.h.shop.Sales.CloseExpired(ctx, r.no); err != nil {
		w.outcome(op, err)
	}
	w.stock(ctx, r)
	if err := w.h.shop.Catalogue.UnfreezeProduct(ctx, p.id); err != nil {
		w.outcome(op, err)
	}
	w.payAtProviders(ctx, op, r, 1+w.rng.IntN(3))
}

// limitLate plays the buyer limit's scenario on its own product (buyer_limit = one order's
// most), for a buyer of its own: an order of the most with a payment at hepay expires and
// closes; a second such order is placed and paid; then the buyer pays the first at hepay, which
// never closed it: a late payment that would take the buyer past the limit, whose order must
// not get codes.
func (w *worker) limitLate(ctx context.Context) {
	const op = "limit-late"
	p := w.h.products[limitProduct]
	buyer := domain.BuyerID(fmt.Sprintf("h%s-limit%d", w.h.nonce, w.h.keySeq.Add(1)))
	w.stock(ctx, &orderRec{product: p.id, qty: 2 * maxPerOrder})
	place := func() *orderRec {
		key := w.newKey()
		res, err := w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: buyer, Product: p.id, Qty: maxPerOrder, IdempotencyKey: key})
		if err != nil {
			w.log(op, "place → %s", w.outcome(op, err))
			return nil
		}
		return w.h.recordAs(res.Order, key, true)
	}
	first := place()
	if first == nil {
		return
	}
	defer first.private.Store(false)
	if _, _, err := w.h.shop.Payments.CreatePayment(ctx, application.NewPayment{Buyer: buyer, OrderNo: first.no, Provider: epayProvider}); err != nil {
		w.log(op, "%s create payment → %s", first.no, w.outcome(op, err))
		return
	}
	first.payments.Or(providerBit(epayProvider))
	time.Sleep(time.Until(first.expires.Add(20 * time.Millisecond)))
	if err := w.h.shop.Sales.CloseExpired(ctx, first.no); err != nil {
		w.log(op, "%s close → %s", first.no, w.outcome(op, err))
		return
	}
	second := place()
	if second == nil {
		return
	}
	defer second.private.Store(false)
	res := w.payments(ctx, second, 1, false, true, second.amount, "pay-"+string(second.no))
	w.log(op, "%s (second, q%d) paid → %s", second.no, second.qty, res)
	w.payAtProviders(ctx, op, first, 1)
}
