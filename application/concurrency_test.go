package application_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// A flash sale: 500 buyers race for 100 codes. The gate admits exactly what it has, everyone
// else hears "sold out", and paying all winners at once sells every admitted unit exactly once.
func TestFlashSaleNeverOversells(t *testing.T) {
	f := newFixture(t)
	const codes, buyersN, limit = 100, 500, 3
	p := f.createProduct(t, limit, codes)
	rng := rand.New(rand.NewPCG(2025, 3))
	qty := make([]int, buyersN)
	for i := range qty {
		qty[i] = 1 + rng.IntN(limit)
	}

	placed := make([]application.PlacedOrder, buyersN)
	errs := make([]error, buyersN)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range buyersN {
		wg.Go(func() {
			<-start
			placed[i], errs[i] = f.place(domain.BuyerID(fmt.Sprintf("buyer-%03d", i)), p.ID(), qty[i], fmt.Sprintf("flash-key-%04d", i))
		})
	}
	close(start)
	wg.Wait()

	var sum int64
	var won []domain.Order
	var soldOut []int
	for i, err := range errs {
		switch {
		case err == nil:
			o := placed[i].Order
			if placed[i].Replayed || o.Qty() != qty[i] || o.Status() != domain.StatusPending {
				t.Fatalf("buyer %d got %+v (replayed %v), want a new PENDING order of %d", i, o.Record(), placed[i].Replayed, qty[i])
			}
			sum += int64(qty[i])
			won = append(won, o)
		case errors.Is(err, domain.ErrSoldOut):
			soldOut = append(soldOut, i)
		default:
			t.Fatalf("buyer %d: unexpected error %v", i, err)
		}
	}
	lv := f.levels(t, p.ID())
	if sum > codes || sum+lv.Stock != codes || lv.Sold != sum {
		t.Fatalf("orders hold %d units, gate %+v; want held + stock = %d", sum, lv, codes)
	}
	if len(soldOut) == 0 {
		t.Fatalf("demand exceeded the stock, yet nobody was sold out")
	}
	for _, i := range soldOut {
		// Stock only shrinks while orders are placed, so a refused buyer asked for more than is
		// left now.
		if int64(qty[i]) <= lv.Stock {
			t.Errorf("buyer %d was sold out asking for %d while %d remain", i, qty[i], lv.Stock)
		}
	}
	f.assertInvariants(t, p.ID())

	// Every winner pays at once, half through the signed callback.
	payErrs := make([]error, len(won))
	paid := make([]domain.Order, len(won))
	start = make(chan struct{})
	for i, o := range won {
		cb := f.callbackFor(t, o, "paid", o.Amount())
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				paid[i], payErrs[i] = f.shop.Payments.HandlePaymentCallback(f.ctx, cb)
			} else {
				paid[i], payErrs[i] = f.shop.Payments.ApplyPayment(f.ctx, paidNotice(o))
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range payErrs {
		if err != nil || paid[i].Status() != domain.StatusPaid {
			t.Fatalf("pay %s: %v (%s)", won[i].No(), err, paid[i].Status())
		}
	}
	if got := f.counts(t, p.ID())[domain.CardSold]; got != sum {
		t.Fatalf("%d codes SOLD, orders paid for %d", got, sum)
	}
	f.assertInvariants(t, p.ID()) // includes: no code SOLD twice, one delivery per PAID order
	if n := len(f.pub.Published()); n != len(won) {
		t.Fatalf("%d delivery events for %d paid orders", n, len(won))
	}
}

// A provider retrying one callback 100 times at once gets 100 successes and one allocation.
func TestConcurrentIdenticalCallbacksAllocateOnce(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 10)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	cb := f.callbackFor(t, o, "paid", o.Amount())

	const n = 100
	got := make([]domain.Order, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = f.shop.Payments.HandlePaymentCallback(f.ctx, cb)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i].Status() != domain.StatusPaid || got[i].No() != o.No() {
			t.Fatalf("callback %d: %v, %s %s", i, errs[i], got[i].No(), got[i].Status())
		}
	}
	cards, err := f.ledger.Cards().Cards(f.ctx, o.No())
	if err != nil || len(cards) != 3 {
		t.Fatalf("order holds %d codes (%v), want 3", len(cards), err)
	}
	if c := f.counts(t, p.ID()); c[domain.CardSold] != 3 {
		t.Fatalf("pool %v, want 3 SOLD", c)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowPay] != 1 {
		t.Fatalf("flow rows %v, want exactly one pay row", ft)
	}
	f.assertInvariants(t, p.ID())
	if d := f.deliveries(t); d[o.No()] != 1 || len(d) != 1 {
		t.Fatalf("delivery events %v, want one for %s", d, o.No())
	}
	if k := f.alertsFor(o.No()); len(k) != 0 {
		t.Fatalf("identical retries raised alerts %v", k)
	}
}

// The timeout and the payment of an order past its expiry race. Whoever wins, the money is
// not lost: the order ends PAID with its codes (the payment won, or the close won and the
// late payment reserved again), and the stock is never both returned and sold.
func TestCloseRacesPayment(t *testing.T) {
	closeWon := 0
	for i := range 50 {
		f := newFixture(t)
		p := f.createProduct(t, 3, 5) // 3 spare units: the late payment always finds stock
		o := f.mustPlace(t, "alice", p.ID(), 2)
		f.clock.Advance(f.cfg.OrderTimeout + time.Second)

		var closeErr, payErr error
		var paid domain.Order
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; closeErr = f.shop.Sales.CloseExpired(f.ctx, o.No()) })
		wg.Go(func() { <-start; paid, payErr = f.shop.Payments.ApplyPayment(f.ctx, paidNotice(o)) })
		close(start)
		wg.Wait()
		if closeErr != nil || payErr != nil {
			t.Fatalf("round %d: close %v, pay %v", i, closeErr, payErr)
		}
		final := f.order(t, o.No())
		if final.Status() != domain.StatusPaid || paid.Status() != domain.StatusPaid {
			t.Fatalf("round %d: order %s (payment answered %s), want PAID", i, final.Status(), paid.Status())
		}
		ft := f.flowTypes(t, o.No())
		if ft[domain.FlowPay] != 1 || ft[domain.FlowTimeoutRestore] != ft[domain.FlowLateReserve] {
			t.Fatalf("round %d: flow %v: a returned reservation must be taken again before the codes are sold", i, ft)
		}
		closeWon += ft[domain.FlowTimeoutRestore]
		f.assertInvariants(t, p.ID())
	}
	t.Logf("the close won %d of 50 rounds", closeWon)
}

// The same race with no spare stock and a competitor who grabs whatever the close returns:
// the order ends PAID, or UNFULFILLED with an alert; never lost, never oversold.
func TestCloseRacesPaymentWithoutStock(t *testing.T) {
	outcomes := map[domain.OrderStatus]int{}
	for i := range 50 {
		f := newFixture(t)
		p := f.createProduct(t, 2, 2)
		o := f.mustPlace(t, "alice", p.ID(), 2)
		f.clock.Advance(f.cfg.OrderTimeout + time.Second)

		var closeErr, payErr, placeErr error
		var rival application.PlacedOrder
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; closeErr = f.shop.Sales.CloseExpired(f.ctx, o.No()) })
		wg.Go(func() { <-start; _, payErr = f.shop.Payments.ApplyPayment(f.ctx, paidNotice(o)) })
		wg.Go(func() {
			<-start
			// The rival keeps trying for a moment, as a flash-sale buyer would.
			for range 200 {
				if rival, placeErr = f.place("bob", p.ID(), 2, f.newKey()); !errors.Is(placeErr, domain.ErrSoldOut) {
					return
				}
			}
		})
		close(start)
		wg.Wait()
		if closeErr != nil || payErr != nil {
			t.Fatalf("round %d: close %v, pay %v", i, closeErr, payErr)
		}
		if placeErr != nil && !errors.Is(placeErr, domain.ErrSoldOut) {
			t.Fatalf("round %d: rival: %v", i, placeErr)
		}
		final := f.order(t, o.No())
		outcomes[final.Status()]++
		switch final.Status() {
		case domain.StatusPaid:
			if placeErr == nil {
				t.Fatalf("round %d: both the late payer and the rival (%s) got the only 2 units", i, rival.Order.No())
			}
		case domain.StatusUnfulfilled:
			if !hasKind(f.alertsFor(o.No()), "paid_unfulfilled") {
				t.Fatalf("round %d: UNFULFILLED without an alert", i)
			}
			if final.PaymentRef() == "" || final.PaidAt().IsZero() {
				t.Fatalf("round %d: the accepted payment is not recorded on the order", i)
			}
		default:
			t.Fatalf("round %d: order ended %s, want PAID or UNFULFILLED", i, final.Status())
		}
		f.assertInvariants(t, p.ID())
	}
	t.Logf("outcomes: %v", outcomes)
}

// Twenty operators refund one order at once: one does the work, all see REFUNDED.
func TestConcurrentRefundsRecycleOnce(t *testing.T) {
	for _, void := range []bool{false, true} {
		t.Run(fmt.Sprintf("void=%v", void), func(t *testing.T) {
			f := newFixture(t)
			p := f.createProduct(t, 3, 5)
			o := f.mustPlace(t, "alice", p.ID(), 3)
			f.mustPay(t, o.No())
			f.assertInvariants(t, p.ID())

			const n = 20
			got := make([]application.RefundResult, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					got[i], errs[i] = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: void})
				})
			}
			close(start)
			wg.Wait()
			for i := range n {
				if errs[i] != nil || got[i].Order.Status() != domain.StatusRefunded {
					t.Fatalf("refund %d: %v (%s)", i, errs[i], got[i].Order.Status())
				}
				// Every answer, the winner's and the replays', tells where the codes went.
				wantRecycled, wantVoided := 3, 0
				if void {
					wantRecycled, wantVoided = 0, 3
				}
				if got[i].Recycled != wantRecycled || got[i].Voided != wantVoided {
					t.Fatalf("refund %d answered recycled %d, voided %d", i, got[i].Recycled, got[i].Voided)
				}
			}
			c := f.counts(t, p.ID())
			flow, to := domain.FlowRefundRestore, domain.CardRecycled
			wantStock := int64(5)
			if void {
				flow, to, wantStock = domain.FlowRefundVoid, domain.CardVoid, 2
			}
			if c[domain.CardSold] != 0 || c[to] != 3 || c[domain.CardUnsold] != 2 {
				t.Fatalf("pool %v, want 3 %s and 2 UNSOLD", c, to)
			}
			if ft := f.flowTypes(t, o.No()); ft[flow] != 1 || ft[domain.FlowRefundRestore]+ft[domain.FlowRefundVoid] != 1 {
				t.Fatalf("flow rows %v, want one %s row", ft, flow)
			}
			f.assertInvariants(t, p.ID())
			if lv := f.levels(t, p.ID()); lv.Stock != wantStock || lv.Sold != 0 {
				t.Fatalf("gate %+v, want stock %d, sold 0", lv, wantStock)
			}
		})
	}
}

// A double (or twentyfold) click: the same submission at once yields one order, answered to all.
func TestConcurrentDuplicateSubmissionsMakeOneOrder(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 10)
	key := f.newKey()
	const n = 20
	got := make([]application.PlacedOrder, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = f.place("alice", p.ID(), 2, key)
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		if got[i].Order.No() != got[0].Order.No() {
			t.Fatalf("submissions got orders %s and %s", got[0].Order.No(), got[i].Order.No())
		}
		if !got[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d submissions say they created the order, want 1", fresh)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 8 || lv.Sold != 2 {
		t.Fatalf("gate %+v, want one reservation of 2", lv)
	}
	f.assertInvariants(t, p.ID())
}
