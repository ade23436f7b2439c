package domain_test

import (
	"errors"
	"testing"
	"time"

	"cardshop/domain"
)

func TestParseCouponCode(t *testing.T) {
	for in, want := range map[string]string{" spring-10 ": "SPRING-10", "ABC": "ABC", "a_b_c": "A_B_C"} {
		got, err := domain.ParseCouponCode(in)
		if err != nil || string(got) != want {
			t.Errorf("ParseCouponCode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ab", "with space", "优惠券码", "x|y", string(make([]byte, 33))} {
		if _, err := domain.ParseCouponCode(in); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("ParseCouponCode(%q): %v, want invalid input", in, err)
		}
	}
}

func TestCouponCheck(t *testing.T) {
	good := func() domain.Coupon {
		return domain.Coupon{Code: "SPRING", Kind: domain.CouponPercent, Value: 10, Products: []domain.ProductID{3, 1, 3}}
	}
	c := good()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if len(c.Products) != 2 || c.Products[0] != 1 || c.Products[1] != 3 {
		t.Errorf("products not sorted and compacted: %v", c.Products)
	}
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for name, mutate := range map[string]func(*domain.Coupon){
		"lower-case code":   func(c *domain.Coupon) { c.Code = "spring" },
		"percent 0":         func(c *domain.Coupon) { c.Value = 0 },
		"percent 100":       func(c *domain.Coupon) { c.Value = 100 },
		"fixed 0":           func(c *domain.Coupon) { c.Kind, c.Value = domain.CouponFixed, 0 },
		"unknown kind":      func(c *domain.Coupon) { c.Kind = 9 },
		"negative minimum":  func(c *domain.Coupon) { c.MinAmount = -1 },
		"no products":       func(c *domain.Coupon) { c.Products = nil },
		"product 0":         func(c *domain.Coupon) { c.Products = []domain.ProductID{0, 2} },
		"until before from": func(c *domain.Coupon) { c.ValidFrom, c.ValidUntil = at, at.Add(-time.Second) },
		"negative uses":     func(c *domain.Coupon) { c.UsesPerProduct = -1 },
		"negative per-buyer": func(c *domain.Coupon) {
			c.UsesPerBuyer = -1
		},
	} {
		c := good()
		mutate(&c)
		if err := c.Check(); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: Check = %v, want invalid input", name, err)
		}
	}
}

func TestCouponDiscount(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	pct := domain.Coupon{Code: "TEN", Kind: domain.CouponPercent, Value: 10, Products: []domain.ProductID{1, 2}}
	fixed := domain.Coupon{Code: "FIVE", Kind: domain.CouponFixed, Value: 500, Products: []domain.ProductID{1}, MinAmount: 1000}
	for _, tc := range []struct {
		name   string
		c      domain.Coupon
		p      domain.ProductID
		amount domain.Money
		want   domain.Money
		err    error
	}{
		{"ten percent", pct, 2, 1999, 199, nil}, // 199.9 rounded down
		{"ten percent of a large amount", pct, 1, 1 << 50, (1 << 50) / 10, nil},
		{"fixed", fixed, 1, 1000, 500, nil},
		{"fixed never makes it free", domain.Coupon{Code: "BIG", Kind: domain.CouponFixed, Value: 10000, Products: []domain.ProductID{1}}, 1, 300, 299, nil},
		{"below the minimum", fixed, 1, 999, 0, domain.ErrCouponNotApplicable},
		{"another product", fixed, 2, 5000, 0, domain.ErrCouponNotApplicable},
		{"disabled", domain.Coupon{Code: "OFF", Kind: domain.CouponFixed, Value: 1, Products: []domain.ProductID{1}, Disabled: true}, 1, 100, 0, domain.ErrCouponNotFound},
		{"not yet", domain.Coupon{Code: "LATER", Kind: domain.CouponFixed, Value: 1, Products: []domain.ProductID{1}, ValidFrom: at.Add(time.Second)}, 1, 100, 0, domain.ErrCouponNotApplicable},
		{"until is exclusive", domain.Coupon{Code: "GONE", Kind: domain.CouponFixed, Value: 1, Products: []domain.ProductID{1}, ValidUntil: at}, 1, 100, 0, domain.ErrCouponNotApplicable},
		{"from is inclusive", domain.Coupon{Code: "NOW", Kind: domain.CouponFixed, Value: 1, Products: []domain.ProductID{1}, ValidFrom: at}, 1, 100, 1, nil},
	} {
		got, err := tc.c.Discount(tc.p, tc.amount, at)
		if !errors.Is(err, tc.err) || (tc.err == nil && got != tc.want) {
			t.Errorf("%s: Discount = %v, %v; want %v, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestOrderWithCoupon(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p, err := domain.NewProduct(1, "card", 1000, 10, at)
	if err != nil {
		t.Fatal(err)
	}
	o, err := domain.NewOrder("o1", "buyer", p, 3, "key-1", at, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	plain := o.Fingerprint()
	c := domain.Coupon{Code: "TEN", Kind: domain.CouponPercent, Value: 10, Products: []domain.ProductID{1}}
	with, err := o.WithCoupon(c, at)
	if err != nil {
		t.Fatal(err)
	}
	if with.Amount() != 2700 || with.Discount() != 300 || with.Coupon() != "TEN" {
		t.Errorf("amount %v discount %v coupon %q; want 27.00, 3.00, TEN", with.Amount(), with.Discount(), with.Coupon())
	}
	if with.Fingerprint() == plain {
		t.Error("the coupon does not change the request's fingerprint: a re-sent key with a coupon would replay the order without")
	}
	back := domain.RehydrateOrder(with.Record())
	if back.Coupon() != "TEN" || back.Discount() != 300 || back.Amount() != 2700 {
		t.Errorf("record round trip lost the coupon: %+v", back.Record())
	}
	if _, err := with.WithCoupon(c, at); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("a second coupon: %v, want invalid input", err)
	}
}
