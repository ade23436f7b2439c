package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// runCoupons checks the coupon store: a created coupon reads back with every field (times to
// the microsecond, products in order), a taken code is ErrCouponExists (of concurrent creates
// exactly one wins) and leaves the stored coupon as it was, an invalid coupon is refused and
// stores nothing, the list is newest first, the disabled flag is stored both ways (a disabled
// coupon is still returned), an unknown code is ErrCouponNotFound, and a create in a failed
// transaction leaves nothing behind. Every case uses codes of its own: a shared database keeps
// the coupons of earlier runs.
func runCoupons(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("create then read: every field is kept", func(t *testing.T) {
		l := newLedger(t)
		at := time.Now().UTC().Truncate(time.Microsecond)
		c := domain.Coupon{Code: newCouponCode(), Kind: domain.CouponPercent, Value: 15, MinAmount: 1000,
			Products:  []domain.ProductID{NewProductID(), NewProductID(), NewProductID()},
			ValidFrom: at.Add(-time.Hour), ValidUntil: at.Add(24 * time.Hour), UsesPerProduct: 100, UsesPerBuyer: 2,
			CreatedAt: at}
		if err := l.Coupons().CreateCoupon(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		want := c
		want.Products = slices.Sorted(slices.Values(c.Products))
		if got := readCoupon(t, l, c.Code); !sameCoupon(got, want) {
			t.Fatalf("Coupon = %+v, want %+v", got, want)
		}
		// No bounds, a fixed discount, repeated products given out of order.
		p := NewProductID()
		c2 := domain.Coupon{Code: newCouponCode(), Kind: domain.CouponFixed, Value: 500, Products: []domain.ProductID{p + 1, p, p + 1},
			CreatedAt: at}
		if err := l.Coupons().CreateCoupon(t.Context(), c2); err != nil {
			t.Fatal(err)
		}
		want2 := c2
		want2.Products = []domain.ProductID{p, p + 1}
		if got := readCoupon(t, l, c2.Code); !sameCoupon(got, want2) {
			t.Fatalf("Coupon = %+v, want %+v", got, want2)
		}
	})

	t.Run("a taken code is ErrCouponExists and changes nothing", func(t *testing.T) {
		l := newLedger(t)
		c := newCoupon()
		if err := l.Coupons().CreateCoupon(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		other := newCoupon()
		other.Code, other.Value = c.Code, c.Value+1
		if err := l.Coupons().CreateCoupon(t.Context(), other); !errors.Is(err, domain.ErrCouponExists) {
			t.Fatalf("second CreateCoupon(%s): err = %v, want ErrCouponExists", c.Code, err)
		}
		if got := readCoupon(t, l, c.Code); !sameCoupon(got, c) {
			t.Fatalf("the first coupon became %+v, want %+v", got, c)
		}
	})

	t.Run("of concurrent creates of one code exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		code := newCouponCode()
		var won, lost atomic.Int64
		parallel(8, func(int) {
			c := newCoupon()
			c.Code = code
			switch err := l.Coupons().CreateCoupon(t.Context(), c); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, domain.ErrCouponExists):
				lost.Add(1)
			default:
				t.Errorf("CreateCoupon: %v", err)
			}
		})
		if won.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("won %d, lost %d; want 1 and 7", won.Load(), lost.Load())
		}
		if got := readCoupon(t, l, code); len(got.Products) != 2 {
			t.Fatalf("the winner holds %d products, want 2 (another's products mixed in?)", len(got.Products))
		}
	})

	t.Run("an invalid coupon is refused and stores nothing", func(t *testing.T) {
		l := newLedger(t)
		for _, bad := range []func(*domain.Coupon){
			func(c *domain.Coupon) { c.Products = nil },
			func(c *domain.Coupon) { c.Kind, c.Value = domain.CouponPercent, 100 },
			func(c *domain.Coupon) { c.ValidUntil = c.ValidFrom },
		} {
			c := newCoupon()
			c.ValidFrom = now()
			bad(&c)
			if err := l.Coupons().CreateCoupon(t.Context(), c); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("CreateCoupon(%+v): err = %v, want ErrInvalidInput", c, err)
			}
			if _, err := l.Coupons().Coupon(t.Context(), c.Code); !errors.Is(err, domain.ErrCouponNotFound) {
				t.Fatalf("Coupon(%s) after a refused create: err = %v, want ErrCouponNotFound", c.Code, err)
			}
		}
	})

	t.Run("an unknown code is ErrCouponNotFound", func(t *testing.T) {
		l := newLedger(t)
		code := newCouponCode()
		if _, err := l.Coupons().Coupon(t.Context(), code); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatalf("Coupon: err = %v, want ErrCouponNotFound", err)
		}
		for _, d := range []bool{true, false} {
			if err := l.Coupons().SetCouponDisabled(t.Context(), code, d); !errors.Is(err, domain.ErrCouponNotFound) {
				t.Fatalf("SetCouponDisabled(%v): err = %v, want ErrCouponNotFound", d, err)
			}
		}
	})

	t.Run("disable and enable; a disabled coupon is still returned and listed", func(t *testing.T) {
		l := newLedger(t)
		c := newCoupon()
		if err := l.Coupons().CreateCoupon(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		for _, d := range []bool{true, true, false, false, true} { // setting the flag it has is no error
			if err := l.Coupons().SetCouponDisabled(t.Context(), c.Code, d); err != nil {
				t.Fatalf("SetCouponDisabled(%v): %v", d, err)
			}
			want := c
			want.Disabled = d
			if got := readCoupon(t, l, c.Code); !sameCoupon(got, want) {
				t.Fatalf("after SetCouponDisabled(%v): %+v, want %+v", d, got, want)
			}
			if got, ok := listedCoupon(t, l, c.Code); !ok || !sameCoupon(got, want) {
				t.Fatalf("Coupons holds %+v (found %v), want %+v", got, ok, want)
			}
		}
	})

	t.Run("the list is newest first", func(t *testing.T) {
		l := newLedger(t)
		base := time.Now().UTC().Truncate(time.Microsecond).Add(time.Duration(rand.IntN(1000)) * time.Hour)
		var codes []domain.CouponCode
		for i := range 3 {
			c := newCoupon()
			c.CreatedAt = base.Add(time.Duration(i) * time.Minute)
			if err := l.Coupons().CreateCoupon(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			codes = append(codes, c.Code)
		}
		all, err := l.Coupons().Coupons(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].CreatedAt.After(all[i-1].CreatedAt) {
				t.Fatalf("Coupons is not newest first: %v after %v", all[i].CreatedAt, all[i-1].CreatedAt)
			}
		}
		var ours []domain.CouponCode
		for _, c := range all {
			if slices.Contains(codes, c.Code) {
				ours = append(ours, c.Code)
			}
		}
		if want := []domain.CouponCode{codes[2], codes[1], codes[0]}; !slices.Equal(ours, want) {
			t.Fatalf("Coupons lists ours as %v, want %v", ours, want)
		}
	})

	t.Run("a create in a failed transaction leaves nothing", func(t *testing.T) {
		l := newLedger(t)
		c := newCoupon()
		boom := errors.New("boom")
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := tx.Coupons().CreateCoupon(t.Context(), c); err != nil {
				return err
			}
			if _, err := tx.Coupons().Coupon(t.Context(), c.Code); err != nil {
				return fmt.Errorf("read back inside the transaction: %w", err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Atomically: %v, want boom", err)
		}
		if _, err := l.Coupons().Coupon(t.Context(), c.Code); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatalf("Coupon after rollback: err = %v, want ErrCouponNotFound", err)
		}
		if _, ok := listedCoupon(t, l, c.Code); ok {
			t.Fatal("Coupons lists a coupon whose transaction failed")
		}
		if err := l.Coupons().CreateCoupon(t.Context(), c); err != nil {
			t.Fatalf("the code is free again: %v", err)
		}
	})
}

// newCouponCode returns a random code, unlikely to collide with another test's or run's.
func newCouponCode() domain.CouponCode {
	return domain.CouponCode(fmt.Sprintf("PT-%016X", rand.Uint64()))
}

// newCoupon returns a valid fixed-discount coupon for two new products, created now.
func newCoupon() domain.Coupon {
	p := NewProductID()
	return domain.Coupon{Code: newCouponCode(), Kind: domain.CouponFixed, Value: 100, Products: []domain.ProductID{p, p + 1},
		UsesPerProduct: 10, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

func readCoupon(t *testing.T, l domain.Ledger, code domain.CouponCode) domain.Coupon {
	t.Helper()
	c, err := l.Coupons().Coupon(t.Context(), code)
	if err != nil {
		t.Fatalf("Coupon(%s): %v", code, err)
	}
	return c
}

func listedCoupon(t *testing.T, l domain.Ledger, code domain.CouponCode) (domain.Coupon, bool) {
	t.Helper()
	all, err := l.Coupons().Coupons(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Code == code {
			return c, true
		}
	}
	return domain.Coupon{}, false
}

// sameCoupon compares field by field, times by instant.
func sameCoupon(a, b domain.Coupon) bool {
	return a.Code == b.Code && a.Kind == b.Kind && a.Value == b.Value && a.MinAmount == b.MinAmount &&
		reflect.DeepEqual(a.Products, b.Products) && a.ValidFrom.Equal(b.ValidFrom) && a.ValidUntil.Equal(b.ValidUntil) &&
		a.UsesPerProduct == b.UsesPerProduct && a.UsesPerBuyer == b.UsesPerBuyer && a.Disabled == b.Disabled &&
		a.CreatedAt.Equal(b.CreatedAt)
}
