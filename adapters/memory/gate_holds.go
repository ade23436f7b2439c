package memory

// The gate's holds: reservations tracked until their units follow an order.

import (
	"context"
	"sort"
	"time"

	"cardshop/domain"
)

// hold is a reservation whose units do not yet follow an order.
type hold struct {
	qty   int64
	at    time.Time // the gate's clock at the reservation, to the millisecond, as Redis scores it
	claim claimKey  // the claim the reservation made, deleted with an orphan
	buyer domain.BuyerID
	// coupon is the coupon whose use the reservation claimed: giving the hold back gives it
	// back; forgetting the hold leaves it to the order.
	coupon domain.CouponCode
}

// public is h as the port lists it: the hold of order no of product p.
func (h hold) public(p domain.ProductID, no domain.OrderNo) domain.Hold {
	return domain.Hold{Product: p, OrderNo: no, Qty: int(h.qty), At: h.at, Late: h.claim.keyless, Buyer: h.buyer,
		Coupon: h.coupon}
}

// holdTime is when a hold taken at now is scored: to the millisecond, as Redis scores it.
func holdTime(now time.Time) time.Time { return time.UnixMilli(now.UnixMilli()) }

// Holds lists up to limit of the product's holds taken at least minAge ago by the gate's
// clock (to the millisecond), oldest first, ties by order number.
func (g *Gate) Holds(_ context.Context, p domain.ProductID, minAge time.Duration, limit int) ([]domain.Hold, error) {
	if limit <= 0 {
		return nil, nil
	}
	cutoff := g.clock.Now().Add(-minAge).UnixMilli()
	g.mu.Lock()
	var out []domain.Hold
	for no, h := range g.holds[p] {
		if h.at.UnixMilli() <= cutoff {
			out = append(out, h.public(p, no))
		}
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].OrderNo < out[j].OrderNo
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Forget stops tracking the holds of these orders of the product; unknown ones are ignored.
func (g *Gate) Forget(_ context.Context, p domain.ProductID, nos []domain.OrderNo) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, no := range nos {
		delete(g.holds[p], no)
	}
	return nil
}

// ReleaseOrphan removes a hold that is still tracked, returns its units to the product's
// counters (when they exist) and its coupon use, and deletes its claim if the claim still
// points at the order. It reports whether it released the hold.
func (g *Gate) ReleaseOrphan(_ context.Context, h domain.Hold) (bool, error) {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.fenced(h.Product, now); ok {
		return false, domain.ErrGateRebuilding
	}
	held, ok := g.holds[h.Product][h.OrderNo]
	if !ok {
		return false, nil
	}
	delete(g.holds[h.Product], h.OrderNo)
	g.addHeld(h.Product, held.buyer, -held.qty)
	g.addCoupon(h.Product, held.coupon, held.buyer, -1)
	if c := g.products[h.Product]; c.exists {
		c.stock += held.qty
		c.sold -= held.qty
		g.products[h.Product] = c
	}
	if cl, live := g.liveClaim(held.claim, now); live && cl.orderNo == h.OrderNo {
		delete(g.claims, held.claim)
	}
	return true, nil
}
