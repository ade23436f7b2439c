package historytest

import (
	"context"
	"fmt"
	"strings"

	"cardshop/application"
	"cardshop/domain"
)

// The history's coupons, on every drawable product: a scarce one (10 % off, a few uses per
// product, two per buyer), whose limits the concurrent orders, closes, late payments and
// refunds fight over, and an open one (1.50 off orders of 10.00 or more, no limit).
const (
	scarceUses     = 4
	scarcePerBuyer = 2
)

// setupCoupons creates the history's coupons.
func (h *history) setupCoupons(ctx context.Context) {
	var ids []domain.ProductID
	for _, p := range h.products[:h.drawable] {
		ids = append(ids, p.id)
	}
	h.coupons = []domain.Coupon{
		{Code: domain.CouponCode(strings.ToUpper("H" + h.nonce + "-TEN")), Kind: domain.CouponPercent, Value: 10, Products: ids,
			UsesPerProduct: scarceUses, UsesPerBuyer: scarcePerBuyer, CreatedAt: h.ports.Clock.Now()},
		{Code: domain.CouponCode(strings.ToUpper("H" + h.nonce + "-FIX")), Kind: domain.CouponFixed, Value: 150, MinAmount: 1000, Products: ids,
			CreatedAt: h.ports.Clock.Now()},
	}
	for i := range h.coupons {
		c := &h.coupons[i]
		if err := c.Check(); err != nil { // puts its products in order, as Discount needs them
			h.t.Fatalf("coupon %s: %v", c.Code, err)
		}
		if err := h.ports.Ledger.Coupons().CreateCoupon(ctx, *c); err != nil {
			h.t.Fatalf("create coupon %s: %v", c.Code, err)
		}
	}
}

func (h *history) coupon(code domain.CouponCode) (domain.Coupon, bool) {
	for _, c := range h.coupons {
		if c.Code == code {
			return c, true
		}
	}
	return domain.Coupon{}, false
}

// placeCoupon places an order with one of the coupons, sometimes the same key twice at once.
func (w *worker) placeCoupon(ctx context.Context) {
	p, buyer, qty, key := w.product(), w.buyer(), 1+w.rng.IntN(maxPerOrder), w.newKey()
	c := w.h.coupons[w.rng.IntN(len(w.h.coupons))]
	k := 1 + w.rng.IntN(2)
	res := make([]application.PlacedOrder, k)
	errs := make([]error, k)
	parallel(k, func(i int) {
		res[i], errs[i] = w.h.shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: buyer, Product: p.id, Qty: qty,
			IdempotencyKey: key, Coupon: string(c.Code)})
	})
	for i := range k {
		if errs[i] != nil {
			w.log("place-coupon", "p%d q%d %s %s → %s", p.id, qty, c.Code, key, w.outcome("place-coupon", errs[i]))
			continue
		}
		if res[i].Order.Coupon() != c.Code {
			w.h.violate("order %s placed with coupon %s carries %q", res[i].Order.No(), c.Code, res[i].Order.Coupon())
		}
		w.h.record(res[i].Order, key)
		w.log("place-coupon", "p%d q%d %s %s → %s", p.id, qty, c.Code, key, res[i].Order.No())
	}
}

// checkCouponOrder checks an order's amount against its coupon: amount = unit price × qty −
// discount, the discount the coupon's terms give at the order's creation.
func (h *history) checkCouponOrder(o domain.Order) []string {
	full := o.UnitPrice() * domain.Money(o.Qty())
	if o.Coupon() == "" {
		if o.Discount() != 0 || o.Amount() != full {
			return []string{fmt.Sprintf("order %s without a coupon: amount %v, discount %v, want %v and 0", o.No(), o.Amount(), o.Discount(), full)}
		}
		return nil
	}
	c, ok := h.coupon(o.Coupon())
	if !ok {
		return []string{fmt.Sprintf("order %s carries coupon %q the history never made", o.No(), o.Coupon())}
	}
	want, err := c.Discount(o.Product(), full, o.CreatedAt())
	if err != nil || o.Discount() != want || o.Amount() != full-want {
		return []string{fmt.Sprintf("order %s with %s: %d × %v, discount %v, amount %v; the coupon gives %v (%v)",
			o.No(), c.Code, o.Qty(), o.UnitPrice(), o.Discount(), o.Amount(), want, err)}
	}
	return nil
}

// checkCouponLimits checks, from the ledger, that no coupon is used on a product more often than
// its limits allow: the gate claimed every use, so the orders whose use stands can never pass
// them (reconcile checks that the gate's counts equal these).
func (h *history) checkCouponLimits(ctx context.Context) []string {
	var v []string
	for _, p := range h.products[:h.drawable] {
		counts, err := h.ports.Ledger.Orders().CouponUses(ctx, p.id)
		if err != nil {
			v = append(v, fmt.Sprintf("product %d: coupon uses: %v", p.id, err))
			continue
		}
		for code, n := range counts {
			c, ok := h.coupon(code)
			if !ok {
				v = append(v, fmt.Sprintf("product %d: uses of unknown coupon %q", p.id, code))
				continue
			}
			if c.UsesPerProduct > 0 && n.Uses > c.UsesPerProduct {
				v = append(v, fmt.Sprintf("product %d: coupon %s used %d times, limit %d", p.id, code, n.Uses, c.UsesPerProduct))
			}
			for b, k := range n.Buyers {
				if c.UsesPerBuyer > 0 && k > c.UsesPerBuyer {
					v = append(v, fmt.Sprintf("product %d: coupon %s used %d times by %s, limit %d", p.id, code, k, b, c.UsesPerBuyer))
				}
			}
			h.mu.Lock()
			h.couponPeak[code] = max(h.couponPeak[code], n.Uses)
			h.mu.Unlock()
		}
	}
	return v
}

// usesOf is how many times each code of the product at index i is sold.
func (h *history) usesOf(i int) int {
	if i == multiProduct {
		return multiUses
	}
	return 1
}
