package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CouponCode is what a buyer types to get a discount: 3 to 32 of A-Z, 0-9, '-' and '_',
// stored upper-case (a buyer's "spring-10" is SPRING-10).
type CouponCode string

// ParseCouponCode trims and upper-cases s and checks it.
func ParseCouponCode(s string) (CouponCode, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) < 3 || len(s) > 32 {
		return "", Invalid("coupon", "must be 3 to 32 characters")
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return "", Invalid("coupon", "may hold only letters, digits, '-' and '_'")
		}
	}
	return CouponCode(s), nil
}

// CouponKind is how a coupon takes money off. The numbers are stored: never renumber one.
type CouponKind uint8

// The coupon kinds.
const (
	CouponPercent CouponKind = 1 // Value percent of the order's amount, 1 to 99
	CouponFixed   CouponKind = 2 // Value minor units off the order's amount
)

// String names the kind as the API and the console spell it.
func (k CouponKind) String() string {
	switch k {
	case CouponPercent:
		return "percent"
	case CouponFixed:
		return "fixed"
	}
	return fmt.Sprintf("CouponKind(%d)", uint8(k))
}

// ParseCouponKind reads "percent" or "fixed".
func ParseCouponKind(s string) (CouponKind, error) {
	switch s {
	case "percent":
		return CouponPercent, nil
	case "fixed":
		return CouponFixed, nil
	}
	return 0, Invalid("kind", `must be "percent" or "fixed"`)
}

// MaxCouponProducts bounds how many products one coupon names.
const MaxCouponProducts = 200

// Coupon is a discount an operator offers. Its uses are counted per product it applies to, in
// that product's stock gate, by the same atomic step that takes the stock (so concurrent orders
// can never use it more often than allowed, on a Redis Cluster too: a product's keys share one
// slot, and a count shared by several products could not be taken in the same step).
type Coupon struct {
	Code  CouponCode
	Kind  CouponKind
	Value int64 // percent (1-99) or minor units (≥ 1)
	// MinAmount is the order amount (before the discount) the coupon needs; 0: any.
	MinAmount Money
	// Products the coupon applies to, ascending, without repeats; at least one.
	Products []ProductID
	// ValidFrom and ValidUntil bound when an order may use it ([from, until)); zero: no bound.
	ValidFrom, ValidUntil time.Time
	// UsesPerProduct is how many orders of each product may carry it; 0: no limit.
	UsesPerProduct int64
	// UsesPerBuyer is how many orders of each product one buyer may place with it; 0: no limit.
	UsesPerBuyer int64
	Disabled     bool
	CreatedAt    time.Time
}

// Check validates c and puts its products in order.
func (c *Coupon) Check() error {
	if _, err := ParseCouponCode(string(c.Code)); err != nil || string(c.Code) != strings.ToUpper(string(c.Code)) {
		return Invalid("code", "must be 3 to 32 of A-Z, 0-9, '-' and '_'")
	}
	switch c.Kind {
	case CouponPercent:
		if c.Value < 1 || c.Value > 99 {
			return Invalid("value", "a percentage must be 1 to 99")
		}
	case CouponFixed:
		if c.Value < 1 || c.Value > 1<<40 {
			return Invalid("value", "a fixed discount must be a positive amount")
		}
	default:
		return Invalid("kind", `must be "percent" or "fixed"`)
	}
	if c.MinAmount < 0 {
		return Invalid("min_amount", "must not be negative")
	}
	if len(c.Products) == 0 || len(c.Products) > MaxCouponProducts {
		return Invalid("products", fmt.Sprintf("must name 1 to %d products", MaxCouponProducts))
	}
	c.Products = slices.Clone(c.Products)
	slices.Sort(c.Products)
	c.Products = slices.Compact(c.Products)
	if c.Products[0] <= 0 {
		return Invalid("products", "must be positive product ids")
	}
	if !c.ValidFrom.IsZero() && !c.ValidUntil.IsZero() && !c.ValidUntil.After(c.ValidFrom) {
		return Invalid("valid_until", "must be after valid_from")
	}
	if c.UsesPerProduct < 0 || c.UsesPerProduct > 1<<40 {
		return Invalid("uses_per_product", "must be 0 (no limit) or a positive count")
	}
	if c.UsesPerBuyer < 0 || c.UsesPerBuyer > 1<<40 {
		return Invalid("uses_per_buyer", "must be 0 (no limit) or a positive count")
	}
	return nil
}

// Coupon refusals: a buyer's coupon that cannot be used on this order. Each refuses the order
// before anything is reserved.
var (
	// ErrCouponNotFound means no coupon has that code (or it is disabled): the two answer the
	// same, so a buyer cannot tell a code that was withdrawn from one that never existed.
	ErrCouponNotFound = errors.New("no such coupon")
	// ErrCouponNotApplicable means the coupon exists but not for this product, not at this
	// time, or not for an amount this small.
	ErrCouponNotApplicable = errors.New("the coupon does not apply to this order")
	// ErrCouponUsedUp means the coupon has been used as often as it may on this product.
	ErrCouponUsedUp = errors.New("the coupon has been used up")
	// ErrCouponBuyerLimit means the buyer has used the coupon as often as one buyer may.
	ErrCouponBuyerLimit = errors.New("you have used this coupon as often as one buyer may")
	// ErrCouponExists means a coupon with that code already exists.
	ErrCouponExists = errors.New("a coupon with that code already exists")
)

// Discount is what c takes off an order of product p with amount (before the discount) at t.
// The buyer always pays at least one minor unit: a discount never makes an order free (an
// order without a payment would need a path of its own). A percentage is rounded down, in the
// buyer's disfavour by less than one minor unit. Errors: ErrCouponNotFound when disabled,
// ErrCouponNotApplicable when p, t or amount is outside the coupon's terms.
func (c Coupon) Discount(p ProductID, amount Money, t time.Time) (Money, error) {
	if c.Disabled {
		return 0, ErrCouponNotFound
	}
	if _, ok := slices.BinarySearch(c.Products, p); !ok {
		return 0, fmt.Errorf("%w: not for this product", ErrCouponNotApplicable)
	}
	if !c.ValidFrom.IsZero() && t.Before(c.ValidFrom) {
		return 0, fmt.Errorf("%w: not valid yet", ErrCouponNotApplicable)
	}
	if !c.ValidUntil.IsZero() && !t.Before(c.ValidUntil) {
		return 0, fmt.Errorf("%w: expired", ErrCouponNotApplicable)
	}
	if amount < c.MinAmount || amount < 2 {
		return 0, fmt.Errorf("%w: the order's amount is below the coupon's minimum", ErrCouponNotApplicable)
	}
	var off Money
	switch c.Kind {
	case CouponPercent:
		off = Money(int64(amount)/100*c.Value) + Money(int64(amount)%100*c.Value/100)
	case CouponFixed:
		off = Money(c.Value)
	default:
		return 0, ErrCouponNotApplicable
	}
	return min(off, amount-1), nil
}

// CouponCount is how often a coupon is used on one product: in all, and by each buyer.
type CouponCount struct {
	Uses   int64
	Buyers map[BuyerID]int64
}

// CouponCounts is a product's coupon counts by code.
type CouponCounts map[CouponCode]CouponCount

// Equal reports whether a and b hold the same counts (a zero count and an absent one are
// equal).
func (a CouponCounts) Equal(b CouponCounts) bool {
	return a.covers(b) && b.covers(a)
}

func (a CouponCounts) covers(b CouponCounts) bool {
	for code, ca := range a {
		cb := b[code]
		if ca.Uses != cb.Uses {
			return false
		}
		for buyer, n := range ca.Buyers {
			if n != cb.Buyers[buyer] {
				return false
			}
		}
	}
	return true
}

// CouponStore keeps the coupons.
type CouponStore interface {
	// CreateCoupon stores c (checked). ErrCouponExists for a taken code.
	CreateCoupon(ctx context.Context, c Coupon) error
	// Coupon returns ErrCouponNotFound for an unknown code (a disabled one is returned).
	Coupon(ctx context.Context, code CouponCode) (Coupon, error)
	// Coupons lists every coupon, newest first.
	Coupons(ctx context.Context) ([]Coupon, error)
	// SetCouponDisabled stores the flag; ErrCouponNotFound for an unknown code.
	SetCouponDisabled(ctx context.Context, code CouponCode, disabled bool) error
}
