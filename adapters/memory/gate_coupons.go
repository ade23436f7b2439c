package memory

// The gate's coupon counts: how often each coupon is used on a product, in all and by each
// buyer (lua/reserve.lua's couponuse and couponbuyer hashes).

import (
	"context"

	"cardshop/domain"
)

// couponBuyer names one buyer's uses of one coupon.
type couponBuyer struct {
	code  domain.CouponCode
	buyer domain.BuyerID
}

// couponUses are one product's coupon counts; a count that reaches 0 is dropped, as the
// scripts' HDEL does.
type couponUses struct {
	byCode  map[domain.CouponCode]int64
	byBuyer map[couponBuyer]int64
}

// uses is how often code is used on the product (u may be nil: none).
func (u *couponUses) uses(code domain.CouponCode) int64 {
	if u == nil {
		return 0
	}
	return u.byCode[code]
}

// buyerUses is how often buyer used code on the product (u may be nil: none).
func (u *couponUses) buyerUses(code domain.CouponCode, buyer domain.BuyerID) int64 {
	if u == nil {
		return 0
	}
	return u.byBuyer[couponBuyer{code: code, buyer: buyer}]
}

// couponsOf returns p's coupon counts, made on first use.
func (g *Gate) couponsOf(p domain.ProductID) *couponUses {
	u := g.coupons[p]
	if u == nil {
		u = &couponUses{byCode: map[domain.CouponCode]int64{}, byBuyer: map[couponBuyer]int64{}}
		g.coupons[p] = u
	}
	return u
}

// addCoupon adds n to code's uses on p and, with a buyer, to the buyer's; nothing without a
// code or with n 0.
func (g *Gate) addCoupon(p domain.ProductID, code domain.CouponCode, buyer domain.BuyerID, n int64) {
	if code == "" || n == 0 {
		return
	}
	u := g.couponsOf(p)
	if u.byCode[code] += n; u.byCode[code] <= 0 {
		delete(u.byCode, code)
	}
	if buyer == "" {
		return
	}
	k := couponBuyer{code: code, buyer: buyer}
	if u.byBuyer[k] += n; u.byBuyer[k] <= 0 {
		delete(u.byBuyer, k)
	}
}

// checkCoupon refuses a code the Redis gate's scripts would refuse: it must be what
// domain.ParseCouponCode gives.
func checkCoupon(code domain.CouponCode) error {
	if code == "" {
		return nil
	}
	if c, err := domain.ParseCouponCode(string(code)); err != nil || c != code {
		return domain.Invalid("coupon", "must be 3 to 32 of A-Z, 0-9, '-' and '_'")
	}
	return nil
}

// CouponCounts returns a copy of the product's coupon counts.
func (g *Gate) CouponCounts(_ context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := domain.CouponCounts{}
	u := g.coupons[p]
	if u == nil {
		return out, nil
	}
	for code, n := range u.byCode {
		cc := out[code]
		cc.Uses = n
		out[code] = cc
	}
	for k, n := range u.byBuyer {
		cc := out[k.code]
		if cc.Buyers == nil {
			cc.Buyers = map[domain.BuyerID]int64{}
		}
		cc.Buyers[k.buyer] = n
		out[k.code] = cc
	}
	return out, nil
}
