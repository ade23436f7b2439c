package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"cardshop/domain"
)

// couponStore keeps the coupons in the process's memory.
type couponStore struct{ s *store }

// copyCoupon copies c's products: a stored coupon never shares them with a caller.
func copyCoupon(c domain.Coupon) domain.Coupon {
	c.Products = slices.Clone(c.Products)
	return c
}

func (r couponStore) CreateCoupon(_ context.Context, c domain.Coupon) error {
	if err := c.Check(); err != nil {
		return err
	}
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if _, taken := r.s.data.coupons[c.Code]; taken {
		return fmt.Errorf("create coupon %s: %w", c.Code, domain.ErrCouponExists)
	}
	c.CreatedAt = utcMicro(c.CreatedAt)
	c.ValidFrom, c.ValidUntil = utcMicro(c.ValidFrom), utcMicro(c.ValidUntil)
	put(r.s, r.s.data.coupons, c.Code, copyCoupon(c))
	return nil
}

func (r couponStore) Coupon(_ context.Context, code domain.CouponCode) (domain.Coupon, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Coupon{}, err
	}
	defer release()
	c, ok := r.s.data.coupons[code]
	if !ok {
		return domain.Coupon{}, fmt.Errorf("coupon %s: %w", code, domain.ErrCouponNotFound)
	}
	return copyCoupon(c), nil
}

// Coupons lists newest first, then by code (as the table's ORDER BY).
func (r couponStore) Coupons(_ context.Context) ([]domain.Coupon, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.Coupon, 0, len(r.s.data.coupons))
	for _, c := range r.s.data.coupons {
		out = append(out, copyCoupon(c))
	}
	slices.SortFunc(out, func(a, b domain.Coupon) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.Code), string(b.Code))
	})
	return out, nil
}

func (r couponStore) SetCouponDisabled(_ context.Context, code domain.CouponCode, disabled bool) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	c, ok := r.s.data.coupons[code]
	if !ok {
		return fmt.Errorf("coupon %s: %w", code, domain.ErrCouponNotFound)
	}
	c.Disabled = disabled
	put(r.s, r.s.data.coupons, code, c)
	return nil
}

// utcMicro is t as a DATETIME(6) column keeps it: in UTC, to the microsecond; zero stays zero.
func utcMicro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
