package historytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// opWeights is the default operation mix: how often each operation is drawn, relative to the
// others (HISTORY_MIX overrides it).
// Concurrently duplicated payments of CLOSED or FAILED orders (late) are the hot spot: a
// provider resending while the first attempt is in flight, a callback that lost to the sweeper.
var opWeights = map[string]int{
	"place":            200, // a fresh idempotency key
	"place-coupon":     80,  // a fresh key with one of the history's coupons, sometimes twice at once
	"guest-place":      60,  // a guest order (the storefront's), its buyer one of a few addresses
	"replay":           40,  // an earlier key, same body
	"reuse-key":        20,  // an earlier key, another body
	"double-submit":    30,  // one fresh key sent 2-4 times at once
	"pay":              120, // a PENDING order, once
	"pay-twice":        40,  // the same notice twice in a row
	"pay-concurrently": 60,  // the same notice 2-16 times at once, any order
	"pay-late":         80,  // a CLOSED or FAILED order (closed first if due), mostly 2-16 times at once
	"underpay":         20,  // a wrong amount: refused, nothing changes
	"payment-failed":   40,
	"close-expired":    30,
	"sweep":            20,
	"refund":           40, // recycle or void, sometimes twice at once
	"fulfil":           30, // an UNFULFILLED order, sometimes twice at once
	"freeze":           2,
	"unfreeze":         20,
	"repair":           10, // Reconcile with repair of the last product: its gate rebuilt mid-sale
	"import":           50, // fresh codes, sometimes with one the product has
	"void":             8,  // freeze a product (a leaked batch) and void 1-3 of its codes
	"relay":            30,
	// Payments through the history's providers (providers.go, payops.go).
	"provider-create": 80, // a PENDING order's payment at hpay or hepay, sometimes both
	"provider-pay":    60, // the buyer pays there; the notice 1-3 times, sometimes at once, from both
	"provider-late":   60, // an expired order's payment still open at its provider is paid
	"provider-refund": 40, // void, recycle or default, with a reason; often two operators at once
	"refund-notify":   30, // the provider finishes a pending refund: its notice, sometimes twice at once
	"reveal":          30, // the buyer reads a PAID order's codes
	"refund-fulfil":   10, // a pending refund of an UNFULFILLED order, then a fulfil
	"window-late":     5,  // an order placed before the sale\'s end, paid at hepay after it
	"limit-late":      5,  // a late payment at hepay that would take a buyer past the limit
}

func opNames() []string { return sortedKeys(opWeights) }

// worker issues random operations until its deadline.
type worker struct {
	h   *history
	id  int
	rng *rand.Rand
	ops []string // the drawable operations, by weight
}

func (w *worker) run(until time.Time) {
	if w.ops == nil {
		for _, name := range opNames() {
			for range w.h.s.mix[name] {
				w.ops = append(w.ops, name)
			}
		}
	}
	if len(w.ops) == 0 {
		return
	}
	for time.Now().Before(until) {
		name := w.ops[w.rng.IntN(len(w.ops))]
		w.do(name)
		if w.rng.IntN(10) > 0 {
			time.Sleep(time.Duration(w.rng.IntN(3000)) * time.Microsecond)
		}
	}
}

func (w *worker) do(name string) {
	ctx := context.Background()
	switch name {
	case "place":
		w.place(ctx)
	case "guest-place":
		w.guestPlace(ctx)
	case "place-coupon":
		w.placeCoupon(ctx)
	case "replay":
		w.replay(ctx, true)
	case "reuse-key":
		w.replay(ctx, false)
	case "double-submit":
		w.doubleSubmit(ctx)
	case "pay":
		w.payOp(ctx, name, w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPending && !w.due(r) }), 1, false)
	case "pay-twice":
		w.payOp(ctx, name, w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPending }), 2, false)
	case "pay-concurrently":
		w.payOp(ctx, name, w.pick(nil), 2+w.rng.IntN(15), true)
	case "pay-late":
		w.payLate(ctx)
	case "underpay":
		w.underpay(ctx)
	case "payment-failed":
		w.paymentFailed(ctx)
	case "close-expired":
		if r := w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPending }); r != nil {
			err := w.h.shop.Sales.CloseExpired(ctx, r.no)
			w.log(name, "%s due=%v → %s", r.no, w.due(r), w.outcome(name, err))
		}
	case "sweep":
		n, err := w.h.shop.Sales.Sweep(ctx)
		w.log(name, "%d → %s", n, w.outcome(name, err))
	case "refund":
		w.refund(ctx)
	case "fulfil":
		w.fulfil(ctx)
	case "freeze", "unfreeze":
		p := w.product()
		var err error
		if name == "freeze" {
			err = w.h.shop.Catalogue.FreezeProduct(ctx, p.id, "history")
		} else {
			err = w.h.shop.Catalogue.UnfreezeProduct(ctx, p.id)
		}
		w.log(name, "p%d → %s", p.id, w.outcome(name, err))
	case "repair":
		// Only the last product is repaired: a rebuild heals the gate it sets, and the others'
		// gates must keep whatever drift the other operations cause for the checkpoint to see.
		p := w.h.products[productsN-1]
		rep, err := w.h.shop.Catalogue.Reconcile(ctx, p.id, true)
		w.log(name, "p%d → %d differences after the rebuild, %s", p.id, rep.Differences, w.outcome(name, err))
	case "import":
		w.importCodes(ctx)
	case "void":
		w.voidCodes(ctx)
	case "relay":
		n, err := w.h.shop.Relay.RelayOutbox(ctx)
		w.log(name, "%d sent → %s", n, w.outcome(name, err))
		n, err = w.h.shop.Relay.RelayMail(ctx)
		w.log(name, "%d mails sent → %s", n, w.outcome(name, err))
	case "provider-create":
		w.providerCreate(ctx)
	case "provider-pay":
		w.providerPay(ctx)
	case "provider-late":
		w.providerLate(ctx)
	case "provider-refund":
		w.providerRefund(ctx)
	case "refund-notify":
		w.refundNotify(ctx)
	case "reveal":
		w.reveal(ctx)
	case "refund-fulfil":
		w.refundThenFulfil(ctx)
	case "window-late":
		w.windowLate(ctx)
	case "limit-late":
		if w.h.limitBusy.CompareAndSwap(false, true) {
			w.limitLate(ctx)
			w.h.limitBusy.Store(false)
		}
	default:
		panic("unknown operation " + name)
	}
}

// log adds a line to the history and counts the operation.
func (w *worker) log(op, format string, args ...any) {
	w.h.ops.add(fmt.Sprintf("%7.3fs w%02d %s %s", time.Since(w.h.start).Seconds(), w.id, op, fmt.Sprintf(format, args...)))
	w.h.count(op)
}

// expected are the errors an operation may answer in a history: refusals and contention.
var expected = []error{domain.ErrSoldOut, domain.ErrProductFrozen, domain.ErrRequestInProgress, domain.ErrIdempotencyMismatch,
	domain.ErrInvalidTransition, domain.ErrAmountMismatch, domain.ErrGateNotReady, domain.ErrUnavailable, domain.ErrBuyerLimit,
	domain.ErrBuyerHoldingLimit, domain.ErrProductNotFrozen, domain.ErrVoidExceedsFreeStock, domain.ErrSaleEnded,
	domain.ErrOrderNotPayable, domain.ErrRefundRefused, domain.ErrCouponUsedUp, domain.ErrCouponBuyerLimit,
	domain.ErrCouponNotApplicable}

func isErr(err, target error) bool { return errors.Is(err, target) }

// outcome names an answer for the log and the summary, and records an unexpected error as a
// violation.
func (w *worker) outcome(op string, err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range expected {
		if errors.Is(err, e) {
			w.h.count(op + " → " + e.Error())
			return e.Error()
		}
	}
	w.h.violate("%s: unexpected error: %v", op, err)
	return "UNEXPECTED " + err.Error()
}

func (w *worker) product() product { return w.h.products[w.rng.IntN(w.h.drawable)] }

func (w *worker) buyer() domain.BuyerID { return w.h.buyers[w.rng.IntN(len(w.h.buyers))] }

func (w *worker) newKey() string {
	return fmt.Sprintf("hk-%s-%d-%d", w.h.nonce, w.id, w.h.keySeq.Add(1))
}

func (w *worker) due(r *orderRec) bool { return !w.h.ports.Clock.Now().Before(r.expires) }

// pick draws one of the recent orders that satisfy ok (nil: any), or nil.
func (w *worker) pick(ok func(*orderRec) bool) *orderRec {
	w.h.mu.Lock()
	recent := w.h.orders[max(0, len(w.h.orders)-recentWindow):]
	w.h.mu.Unlock()
	if len(recent) == 0 {
		return nil
	}
	for range 24 {
		r := recent[w.rng.IntN(len(recent))]
		if !r.private.Load() && (ok == nil || ok(r)) {
			r.dirty.Store(true)
			return r
		}
	}
	return nil
}

func (w *worker) place(ctx context.Context) {
	p, buyer, qty, key := w.product(), w.buyer(), 1+w.rng.IntN(maxPerOrder), w.newKey()
	res, err := w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: buyer, Product: p.id, Qty: qty, IdempotencyKey: key})
	if err == nil {
		if res.Replayed {
			w.h.violate("a fresh key %s was answered as a replay of %s", key, res.Order.No())
		}
		w.h.record(res.Order, key)
		w.log("place", "p%d q%d %s → %s", p.id, qty, key, res.Order.No())
		return
	}
	w.log("place", "p%d q%d %s → %s", p.id, qty, key, w.outcome("place", err))
}

// guestPlace places a guest order for one of buyersN addresses (their buyers are the
// addresses' GuestBuyer, so the limits hold per address); replays and payments then treat it
// like any order.
func (w *worker) guestPlace(ctx context.Context) {
	p, qty, key := w.product(), 1+w.rng.IntN(maxPerOrder), w.newKey()
	email := fmt.Sprintf("guest%d.%s@example.com", w.rng.IntN(buyersN), w.h.nonce)
	res, err := w.h.shop.Sales.PlaceGuestOrder(ctx, application.GuestOrder{Product: p.id, Qty: qty, Email: email, Lang: "en",
		IdempotencyKey: key})
	if err == nil {
		if res.Replayed {
			w.h.violate("a fresh key %s was answered as a replay of %s", key, res.Order.No())
		}
		w.h.record(res.Order, key)
		w.log("guest-place", "p%d q%d %s → %s", p.id, qty, key, res.Order.No())
		return
	}
	w.log("guest-place", "p%d q%d %s → %s", p.id, qty, key, w.outcome("guest-place", err))
}

// nopMailer accepts every e-mail: the history checks the e-mails recorded, not their sending.
type nopMailer struct{}

func (nopMailer) SendOrderMail(context.Context, domain.OrderMail) error { return nil }

// replay sends an earlier order's key again: with the same body it must answer that order,
// with another it must refuse; it never makes a second order.
func (w *worker) replay(ctx context.Context, same bool) {
	op := "replay"
	if !same {
		op = "reuse-key"
	}
	r := w.pick(nil)
	if r == nil {
		return
	}
	qty := r.qty
	if !same {
		qty = 1 + (r.qty+w.rng.IntN(maxPerOrder-1))%maxPerOrder // any other qty
	}
	res, err := w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: r.buyer, Product: r.product, Qty: qty, IdempotencyKey: r.key,
		Coupon: string(r.coupon)})
	switch {
	case err == nil && !same:
		w.h.violate("key %s of %s (qty %d) reused with qty %d answered order %s", r.key, r.no, r.qty, qty, res.Order.No())
	case err == nil && (res.Order.No() != r.no || !res.Replayed):
		w.h.violate("replay of key %s answered order %s (replayed %v), want %s", r.key, res.Order.No(), res.Replayed, r.no)
	case err == nil:
		r.see(res.Order)
	case same && errors.Is(err, domain.ErrIdempotencyMismatch):
		w.h.violate("replay of key %s with the body of %s refused as another request", r.key, r.no)
	}
	w.log(op, "%s q%d → %s", r.no, qty, w.outcome(op, err))
}

// doubleSubmit sends one fresh key 2 to 4 times at once: one order at most, the same for all.
func (w *worker) doubleSubmit(ctx context.Context) {
	p, buyer, qty, key := w.product(), w.buyer(), 1+w.rng.IntN(maxPerOrder), w.newKey()
	k := 2 + w.rng.IntN(3)
	res := make([]application.PlacedOrder, k)
	errs := make([]error, k)
	parallel(k, func(i int) {
		res[i], errs[i] = w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: buyer, Product: p.id, Qty: qty, IdempotencyKey: key})
	})
	var outs []string
	fresh, nos := 0, map[domain.OrderNo]bool{}
	for i := range k {
		if errs[i] != nil {
			outs = append(outs, w.outcome("double-submit", errs[i]))
			continue
		}
		w.h.record(res[i].Order, key)
		nos[res[i].Order.No()] = true
		if !res[i].Replayed {
			fresh++
		}
		outs = append(outs, string(res[i].Order.No()))
	}
	if len(nos) > 1 || fresh > 1 {
		w.h.violate("%d submissions of key %s made %d new orders, answered %d order numbers", k, key, fresh, len(nos))
	}
	w.log("double-submit", "p%d q%d %s ×%d → %s", p.id, qty, key, k, strings.Join(outs, " "))
}

// payLate pays an order that no longer holds its reservation: a CLOSED or FAILED one, or a
// PENDING one past its expiry, closed first. Mostly several identical notices at once.
func (w *worker) payLate(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool {
		st := r.status()
		return st == domain.StatusClosed || st == domain.StatusFailed || (st == domain.StatusPending && w.due(r))
	})
	if r == nil {
		return
	}
	if r.status() == domain.StatusPending {
		if err := w.h.shop.Sales.CloseExpired(ctx, r.no); err != nil {
			w.outcome("pay-late", err)
		}
	}
	k := 1
	if w.rng.IntN(4) > 0 {
		k = 2 + w.rng.IntN(15)
	}
	w.payOp(ctx, "pay-late", r, k, true)
}

// payOp applies k identical paid notices of r's amount, at once when concurrent, else one after
// the other; each goes through the signed callback or ApplyPayment.
func (w *worker) payOp(ctx context.Context, op string, r *orderRec, k int, concurrent bool) {
	if r == nil {
		return
	}
	before := r.status()
	ref := "pay-" + string(r.no)
	if w.rng.IntN(50) == 0 {
		ref = fmt.Sprintf("pay-%s-other", r.no) // a second, different payment
	}
	results := w.payments(ctx, r, k, concurrent, true, r.amount, ref)
	w.log(op, "%s (%s, q%d) ×%d → %s", r.no, before, r.qty, k, results)
}

// payments sends k notices and returns a summary of the answers. A paid notice of the full
// amount answered without error is an accepted payment.
func (w *worker) payments(ctx context.Context, r *orderRec, k int, concurrent, paid bool, amount domain.Money, ref string) string {
	viaCallback := make([]bool, k)
	for i := range viaCallback {
		viaCallback[i] = w.rng.IntN(2) == 0
	}
	out := make([]domain.Order, k)
	errs := make([]error, k)
	one := func(i int) {
		if paid && amount == r.amount {
			r.paidNow(w.h.ports.Clock.Now())
		}
		out[i], errs[i] = w.h.pay(ctx, r.no, paid, amount, ref, viaCallback[i])
	}
	if concurrent {
		parallel(k, one)
	} else {
		for i := range k {
			one(i)
		}
	}
	answers := map[string]int{}
	for i := range k {
		if errs[i] != nil {
			answers[w.outcome("payment", errs[i])]++
			continue
		}
		o := out[i]
		r.see(o)
		answers[o.Status().String()]++
		if paid && amount == r.amount {
			r.accepted.Store(true)
			switch o.Status() {
			case domain.StatusPaid, domain.StatusUnfulfilled, domain.StatusRefunded:
			default:
				w.h.violate("payment of %s accepted, answered the order %s", r.no, o.Status())
			}
		}
	}
	return summarize(answers)
}

// pay sends one notice through the signed callback or straight to ApplyPayment.
func (h *history) pay(ctx context.Context, no domain.OrderNo, paid bool, amount domain.Money, ref string, viaCallback bool) (domain.Order, error) {
	if !viaCallback {
		return h.shop.Payments.ApplyPayment(ctx, domain.PaymentNotice{OrderNo: no, Paid: paid, Amount: amount, PaymentRef: ref})
	}
	status := "paid"
	if !paid {
		status = "failed"
	}
	body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: string(no), Status: status, Amount: int64(amount), PaymentRef: ref}, h.ports.Clock.Now())
	if err != nil {
		return domain.Order{}, err
	}
	return h.shop.Payments.HandlePaymentCallback(ctx, application.SignedCallback{Timestamp: ts, Signature: sig, Body: body})
}

// underpay pays less (or more) than the order's amount: refused with ErrAmountMismatch.
func (w *worker) underpay(ctx context.Context) {
	r := w.pick(nil)
	if r == nil {
		return
	}
	delta := domain.Money(1 + w.rng.IntN(int(r.amount)-1))
	if w.rng.IntN(4) == 0 {
		delta = -delta
	}
	o, err := w.h.pay(ctx, r.no, true, r.amount-delta, "pay-"+string(r.no), w.rng.IntN(2) == 0)
	if err == nil || !errors.Is(err, domain.ErrAmountMismatch) {
		w.h.violate("payment of %s instead of %s for %s answered %s, %v; want amount_mismatch", r.amount-delta, r.amount, r.no, o.Status(), err)
	}
	w.log("underpay", "%s paid %s of %s → %v", r.no, r.amount-delta, r.amount, err)
}

func (w *worker) paymentFailed(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool { return r.status() == domain.StatusPending })
	if r == nil {
		return
	}
	res := w.payments(ctx, r, 1, false, false, r.amount, "pay-"+string(r.no))
	w.log("payment-failed", "%s → %s", r.no, res)
}

// refund refunds a PAID or UNFULFILLED order, recycling or voiding its codes, sometimes twice
// at once (two operators).
func (w *worker) refund(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool {
		st := r.status()
		return st == domain.StatusPaid || st == domain.StatusUnfulfilled
	})
	if r == nil {
		return
	}
	// The operator's choice (the default: void what the buyer saw, recycle the rest; void all;
	// or recycle all), made once per order.
	d := w.h.decide(r, w.rng)
	void, recycle := d.void, d.recycle
	k := 1 + w.rng.IntN(2)
	before := r.status()
	answers := map[string]int{}
	var mu sync.Mutex
	parallel(k, func(int) {
		res, err := w.h.shop.Payments.RefundOrder(ctx, application.Refund{OrderNo: r.no, Void: void, Recycle: recycle, Reason: d.reason})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			answers[w.outcome("refund", err)]++
			return
		}
		r.see(res.Order)
		answers[res.Order.Status().String()]++
	})
	w.log("refund", "%s (%s) void=%v recycle=%v ×%d → %s", r.no, before, void, recycle, k, summarize(answers))
}

// fulfil retries an UNFULFILLED order, sometimes twice at once (two operators). Once its
// provider has taken a refund of its money (pending or done), no fulfil may give it codes; any
// refusal is then the right answer.
func (w *worker) fulfil(ctx context.Context) {
	r := w.pick(func(r *orderRec) bool { return r.status() == domain.StatusUnfulfilled })
	if r == nil {
		return
	}
	k := 1 + w.rng.IntN(2)
	answers := map[string]int{}
	var mu sync.Mutex
	refunding := w.h.refundTaken(r)
	parallel(k, func(int) {
		o, err := w.h.shop.Sales.FulfilOrder(ctx, r.no)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && refunding {
			w.h.violate("fulfil during refund: order %s was fulfilled (%s, codes given) after its provider had taken the refund of its money", r.no, o.Status())
		}
		if err != nil && (refunding || w.h.refundTaken(r)) {
			// (A refund that began while the fulfil ran may be what refused it.)
			answers["refused while refunding"]++
			return
		}
		if errors.Is(err, domain.ErrRefundInProgress) {
			// A refund that won its payment's move to REFUNDING but has not reached the provider
			// yet refuses it too: the refusal must name a refund the ledger holds.
			if !w.h.refundRecorded(ctx, r.no) {
				w.h.violate("fulfil: order %s refused as refunding, but none of its payments is REFUNDING or REFUNDED", r.no)
			}
			answers["refused while refunding"]++
			return
		}
		if err != nil {
			answers[w.outcome("fulfil", err)]++
			return
		}
		r.see(o)
		answers[o.Status().String()]++
	})
	w.log("fulfil", "%s q%d ×%d → %s", r.no, r.qty, k, summarize(answers))
}

// refundRecorded reports whether a payment of the order is REFUNDING or REFUNDED in the
// ledger (a refund in flight, or done).
func (h *history) refundRecorded(ctx context.Context, no domain.OrderNo) bool {
	ps, err := h.ports.Ledger.Payments().OfOrder(ctx, no)
	if err != nil {
		h.violate("payments of %s: %v", no, err)
		return true
	}
	for _, p := range ps {
		if p.Status == domain.PaymentRefunding || p.Status == domain.PaymentRefunded {
			return true
		}
	}
	return false
}

// importCodes imports 1 to 4 fresh codes, sometimes with one the product already has.
func (w *worker) importCodes(ctx context.Context) {
	i := w.rng.IntN(w.h.drawable)
	p := w.h.products[i]
	fresh := w.h.newCodes(i, 1+w.rng.IntN(4))
	lines := append([]string(nil), fresh...)
	dup := 0
	w.h.mu.Lock()
	if old := w.h.codes[p.id]; len(old) > 0 && w.rng.IntN(3) == 0 {
		lines = append(lines, old[w.rng.IntN(len(old))])
		dup = 1
	}
	w.h.mu.Unlock()
	rep, err := w.h.shop.Catalogue.ImportCodes(ctx, p.id, strings.NewReader(strings.Join(lines, "\n")))
	if err == nil {
		if rep.Added != len(fresh) || rep.Duplicates != dup || rep.Invalid != 0 || rep.Uses != len(fresh)*w.h.usesOf(i) {
			w.h.violate("import of %d fresh codes and %d known one into %d reported %+v", len(fresh), dup, p.id, rep)
		}
		w.h.mu.Lock()
		w.h.codes[p.id] = append(w.h.codes[p.id], fresh...)
		w.h.mu.Unlock()
	}
	w.log("import", "p%d %d fresh + %d known → %+v %s", p.id, len(fresh), dup, rep, w.outcome("import", err))
}

// voidCodes freezes a product, as an operator does for a leaked batch, and voids 1 to 3 of the
// codes imported into it (sold or voided ones among them, sometimes); the product stays frozen
// until an unfreeze. A void never takes codes promised to orders in flight: the checkpoints'
// stock_inconsistency check and reconciliation would see it. Refused while an unfreeze got in
// between (product_not_frozen) or when the codes exceed the free stock.
func (w *worker) voidCodes(ctx context.Context) {
	p := w.product()
	w.h.mu.Lock()
	old := w.h.codes[p.id]
	var codes []domain.CardCode
	for range 1 + w.rng.IntN(3) {
		if len(old) > 0 {
			c, err := domain.ParseCardCode(old[w.rng.IntN(len(old))])
			if err != nil {
				w.h.violate("void: an imported code does not parse: %v", err)
			}
			codes = append(codes, c)
		}
	}
	w.h.mu.Unlock()
	if len(codes) == 0 {
		return
	}
	err := w.h.shop.Catalogue.FreezeProduct(ctx, p.id, "history: leaked")
	var res application.VoidResult
	if err == nil {
		res, err = w.h.shop.Catalogue.VoidCodes(ctx, p.id, codes, "history")
		if err == nil && (res.Voided+res.NotVoidable != len(codes) || res.NotFound != 0) {
			w.h.violate("void of %d of p%d's codes reported %+v", len(codes), p.id, res)
		}
	}
	w.log("void", "p%d %d codes → voided %d, not voidable %d, %s", p.id, len(codes), res.Voided, res.NotVoidable, w.outcome("void", err))
}

// parallel runs n calls of f released together, and waits for them.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

func summarize(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
