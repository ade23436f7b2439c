package application

import (
	"context"

	"cardshop/domain"
)

// CouponFor is couponFor, the hot path's cached coupon read, for the tests.
func (a *App) CouponFor(ctx context.Context, code domain.CouponCode) (domain.Coupon, error) {
	return a.core.couponFor(ctx, code)
}

// MaxCachedCoupons is how many codes an instance caches.
const MaxCachedCoupons = maxCachedCoupons
