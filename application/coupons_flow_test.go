package application_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/redisgate"
	"cardshop/application"
	"cardshop/domain"
)

// createCoupon stores a coupon on the products for the restock rig's shop.
func (r *restockRig) createCoupon(t *testing.T, c domain.Coupon) domain.Coupon {
	t.Helper()
	c.Code = domain.CouponCode(strings.ToUpper(fmt.Sprintf("%s-%s", c.Code, r.run)))
	c.CreatedAt = r.clock.Now()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if err := r.ledger.Coupons().CreateCoupon(r.ctx, c); err != nil {
		t.Fatalf("create coupon: %v", err)
	}
	return c
}

func (r *restockRig) placeWith(buyer string, pid domain.ProductID, qty int, key string, c domain.CouponCode) (application.PlacedOrder, error) {
	return r.shop.Sales.PlaceOrder(r.ctx, application.PlaceOrder{Buyer: r.buyer(buyer), Product: pid, Qty: qty,
		IdempotencyKey: key, Coupon: string(c)})
}

// wantCouponsReconciled asserts reconcile finds the gate's coupon counts equal to the ledger's.
func (r *restockRig) wantCouponsReconciled(t *testing.T, pid domain.ProductID, wantUses int64, c domain.CouponCode) {
	t.Helper()
	rep, err := r.shop.Catalogue.Reconcile(r.ctx, pid, false)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("reconcile: %+v", rep.Checks)
	}
	uses, err := r.ledger.Orders().CouponUses(r.ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if uses[c].Uses != wantUses {
		t.Fatalf("the ledger counts %d uses of %s, want %d", uses[c].Uses, c, wantUses)
	}
}

func runCoupons(t *testing.T, rig func(*testing.T) *restockRig) {
	t.Run("many buyers at once: exactly the coupon's uses, each order discounted", func(t *testing.T) {
		r := rig(t)
		pid := r.product(t)
		r.importCodes(t, pid, 400)
		c := r.createCoupon(t, domain.Coupon{Code: "RUSH", Kind: domain.CouponPercent, Value: 25, Products: []domain.ProductID{pid},
			UsesPerProduct: 7, UsesPerBuyer: 1})
		var mu sync.Mutex
		placed, usedUp, buyerLimit := 0, 0, 0
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Go(func() {
				// 30 buyers, each twice with different keys: the second is over their one use.
				res, err := r.placeWith(fmt.Sprintf("b%d", i%30), pid, 1+i%3, fmt.Sprintf("rush-%s-%d", r.run, i), c.Code)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					placed++
					o := res.Order
					full := o.UnitPrice() * domain.Money(o.Qty())
					if o.Coupon() != c.Code || o.Discount() != full/4 || o.Amount() != full-full/4 {
						t.Errorf("order %s: coupon %q discount %v amount %v; want %s, %v, %v", o.No(), o.Coupon(), o.Discount(), o.Amount(), c.Code, full/4, full-full/4)
					}
				case errors.Is(err, domain.ErrCouponUsedUp):
					usedUp++
				case errors.Is(err, domain.ErrCouponBuyerLimit):
					buyerLimit++
				default:
					t.Errorf("order %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if placed != 7 || usedUp+buyerLimit != 53 {
			t.Fatalf("placed %d, used up %d, over the buyer's use %d; want 7 placed and 53 refused", placed, usedUp, buyerLimit)
		}
		lv, _, _ := r.gate.Levels(r.ctx, pid)
		if lv.Stock+lv.Sold != 400 {
			t.Fatalf("a refused order moved stock: %+v", lv)
		}
		r.wantCouponsReconciled(t, pid, 7, c.Code)
	})

	t.Run("a close gives the use back, a refund keeps it, a late payment claims it again", func(t *testing.T) {
		r := rig(t)
		pid := r.product(t)
		r.importCodes(t, pid, 20)
		c := r.createCoupon(t, domain.Coupon{Code: "ONE", Kind: domain.CouponFixed, Value: 500, Products: []domain.ProductID{pid},
			UsesPerProduct: 1})
		first, err := r.placeWith("alice", pid, 1, "k-first-"+r.run, c.Code)
		if err != nil || first.Order.Amount() != testPrice-500 {
			t.Fatalf("first order: %+v, %v", first.Order.Record(), err)
		}
		if _, err := r.placeWith("bob", pid, 1, "k-bob-"+r.run, c.Code); !errors.Is(err, domain.ErrCouponUsedUp) {
			t.Fatalf("second use: %v, want coupon used up", err)
		}
		// A replay of the first request still answers its order.
		again, err := r.placeWith("alice", pid, 1, "k-first-"+r.run, c.Code)
		if err != nil || !again.Replayed || again.Order.No() != first.Order.No() {
			t.Fatalf("replay: %+v, %v", again, err)
		}
		// The order expires: its use comes back, and bob takes it.
		r.clock.Advance(application.DefaultConfig().OrderTimeout + time.Second)
		if err := r.shop.Sales.CloseExpired(r.ctx, first.Order.No()); err != nil {
			t.Fatal(err)
		}
		r.drain(t)
		r.wantCouponsReconciled(t, pid, 0, c.Code)
		bob, err := r.placeWith("bob", pid, 1, "k-bob2-"+r.run, c.Code)
		if err != nil {
			t.Fatalf("after the close: %v", err)
		}
		// alice pays her closed order late: the coupon is bob's now, so her payment is taken
		// and the order waits UNFULFILLED for a refund.
		late := r.payLate(t, first.Order, false)
		if late.Status() != domain.StatusUnfulfilled {
			t.Fatalf("late payment with the coupon used up: %s (%s)", late.Status(), late.Reason())
		}
		// bob pays and is refunded: his use stands.
		if got, err := r.shop.Payments.ApplyPayment(r.ctx, paidNotice(bob.Order)); err != nil || got.Status() != domain.StatusPaid {
			t.Fatalf("bob pays: %v", err)
		}
		if _, err := r.shop.Payments.RefundOrder(r.ctx, application.Refund{OrderNo: bob.Order.No(), Reason: "test"}); err != nil {
			t.Fatalf("refund: %v", err)
		}
		r.drain(t)
		r.wantCouponsReconciled(t, pid, 1, c.Code)
		if _, err := r.placeWith("carol", pid, 1, "k-carol-"+r.run, c.Code); !errors.Is(err, domain.ErrCouponUsedUp) {
			t.Fatalf("after the refund: %v, want used up (a refund keeps the use)", err)
		}
		// A rebuild of the gate from the ledger restores the counts.
		if _, err := r.shop.Catalogue.Reconcile(r.ctx, pid, true); err != nil {
			t.Fatal(err)
		}
		r.wantCouponsReconciled(t, pid, 1, c.Code)
		if _, err := r.placeWith("carol", pid, 1, "k-carol2-"+r.run, c.Code); !errors.Is(err, domain.ErrCouponUsedUp) {
			t.Fatalf("after the rebuild: %v, want used up", err)
		}
	})

	t.Run("a coupon that does not apply refuses the order and reserves nothing", func(t *testing.T) {
		r := rig(t)
		pid, other := r.product(t), r.product(t)
		r.importCodes(t, pid, 5)
		c := r.createCoupon(t, domain.Coupon{Code: "MIN", Kind: domain.CouponFixed, Value: 100, Products: []domain.ProductID{pid},
			MinAmount: 3 * testPrice})
		for name, tc := range map[string]struct {
			pid  domain.ProductID
			qty  int
			code domain.CouponCode
			want error
		}{
			"below the minimum": {pid, 2, c.Code, domain.ErrCouponNotApplicable},
			"another product":   {other, 3, c.Code, domain.ErrCouponNotApplicable},
			"unknown":           {pid, 3, "NO-SUCH-COUPON", domain.ErrCouponNotFound},
		} {
			if _, err := r.placeWith("dave", tc.pid, tc.qty, "k-"+strings.ReplaceAll(name, " ", "-")+"-"+r.run, tc.code); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", name, err, tc.want)
			}
		}
		if lv, _, _ := r.gate.Levels(r.ctx, pid); lv.Stock != 5 {
			t.Fatalf("stock after refusals: %+v", lv)
		}
		if _, err := r.placeWith("dave", pid, 3, "k-ok-"+r.run, c.Code); err != nil {
			t.Fatalf("at the minimum: %v", err)
		}
		if err := r.ledger.Coupons().SetCouponDisabled(r.ctx, c.Code, true); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(2 * time.Second) // past the coupon cache
		if _, err := r.placeWith("erin", pid, 1, "k-off-"+r.run, c.Code); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatalf("disabled: %v, want not found", err)
		}
	})
}

// drain relays the outbox: the stock and coupon returns reach the gate.
func (r *restockRig) drain(t *testing.T) {
	t.Helper()
	for range 20 {
		n, err := r.shop.Relay.RelayOutbox(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func TestCouponsMemory(t *testing.T) {
	runCoupons(t, func(t *testing.T) *restockRig {
		return newRestockRig(t, memory.NewLedger(), func(c domain.Clock) domain.StockGate { return memory.NewGate(c) })
	})
}

func TestCouponsMariaDB(t *testing.T) {
	real := newRealLedger(t, "cardshop_test_coupons", true)
	runCoupons(t, func(t *testing.T) *restockRig {
		l, rc := real.get(t)
		return newRestockRig(t, l, func(domain.Clock) domain.StockGate { return redisgate.New(rc) })
	})
}
