package application

import (
	"context"

	"cardshop/domain"
)

// QuoteCoupon tells a buyer what coupon code takes off an order of product p for amount
// (before the discount) now: the storefront's review page shows it before the order is placed.
// Nothing is claimed: the order's own claim at the gate decides whether a use is left, and
// PlaceOrder fixes the discount again when it places the order.
//
// Errors: a ValidationError for a malformed code, ErrCouponNotFound (unknown or disabled),
// ErrCouponNotApplicable, ErrUnavailable.
func (s *Sales) QuoteCoupon(ctx context.Context, p domain.ProductID, amount domain.Money, code string) (domain.CouponCode, domain.Money, error) {
	c, err := domain.ParseCouponCode(code)
	if err != nil {
		return "", 0, err
	}
	coupon, err := s.couponFor(ctx, c)
	if err != nil {
		return "", 0, err
	}
	off, err := coupon.Discount(p, amount, s.clock.Now())
	return c, off, err
}
