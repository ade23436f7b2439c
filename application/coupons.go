package application

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// The audit log's actions of the coupons.
const (
	ActionCouponCreate  = "coupon.create"
	ActionCouponDisable = "coupon.disable"
	ActionCouponEnable  = "coupon.enable"
)

// CouponCacheTTL is how long an instance answers a coupon code from its cached copy before
// reading it again: a disable (or enable, or a new coupon) made through another instance
// reaches this one's orders within it; the instance that made the change applies it at once.
const CouponCacheTTL = time.Second

// maxCachedCoupons bounds the codes an instance caches: the unknown codes a bot types are
// cached too (so guessing does not reach the database per order), and must not grow the
// cache without end. Beyond it a code is read from the ledger each time until entries expire.
const maxCachedCoupons = 4096

// Coupons runs the coupons on the admin side: create, list with their uses, disable, enable.
// Who may do which is ActionRole's table; the driving adapters record each change in the audit
// log with the operator, as every admin change.
type Coupons struct {
	*stock
}

// CouponUses is how often a coupon was used on one of its products.
type CouponUses struct {
	Product domain.ProductID
	Uses    int64
	// Known is false when the product's stock gate could not tell (unreachable, or a gate that
	// keeps no coupon counts): Uses is then 0 and means nothing, never "unused".
	Known bool
}

// CouponListing is a coupon as the admin screens show it, with its uses per product.
type CouponListing struct {
	domain.Coupon
	Uses []CouponUses // one per product, in Products' order
}

// CreateCoupon stores a new coupon, enabled, created now: its code is trimmed and upper-cased,
// its terms checked (domain.Coupon.Check), and every product it names must exist.
//
// Errors: ErrInvalidInput (a *domain.ValidationError naming the field; a product that does not
// exist also matches ErrProductNotFound), ErrCouponExists, ErrUnavailable. Nothing is stored
// on an error.
func (s *Coupons) CreateCoupon(ctx context.Context, c domain.Coupon) (domain.Coupon, error) {
	code, err := domain.ParseCouponCode(string(c.Code))
	if err != nil {
		return domain.Coupon{}, domain.Invalid("code", "must be 3 to 32 of A-Z, 0-9, '-' and '_'")
	}
	c.Code, c.Disabled, c.CreatedAt = code, false, s.clock.Now().UTC().Truncate(time.Microsecond)
	c.ValidFrom, c.ValidUntil = microUTC(c.ValidFrom), microUTC(c.ValidUntil)
	if err := c.Check(); err != nil {
		return domain.Coupon{}, err
	}
	for _, p := range c.Products {
		_, err := s.ledger.Products().Product(ctx, p)
		if errors.Is(err, domain.ErrProductNotFound) {
			return domain.Coupon{}, fmt.Errorf("%w (%w)", domain.Invalid("products", fmt.Sprintf("product %d does not exist", p)), err)
		}
		if err != nil {
			return domain.Coupon{}, fmt.Errorf("create coupon: %w", err)
		}
	}
	err = s.ledger.Coupons().CreateCoupon(ctx, c)
	s.coupons.forget(c.Code) // an unknown answer cached here would hide the new coupon for a TTL
	if err != nil {
		return domain.Coupon{}, fmt.Errorf("create coupon: %w", err)
	}
	return c, nil
}

// microUTC is t in UTC to the microsecond, as the ledger keeps it; zero stays zero.
func microUTC(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Coupons lists every coupon, newest first, with its uses on each of its products as the
// product's stock gate counts them (one gate call per product, whatever the number of
// coupons). A gate that cannot be asked leaves those uses unknown and the list whole.
//
// Errors: ErrUnavailable (the ledger).
func (s *Coupons) Coupons(ctx context.Context) ([]CouponListing, error) {
	all, err := s.ledger.Coupons().Coupons(ctx)
	if err != nil {
		return nil, fmt.Errorf("list coupons: %w", err)
	}
	counts := map[domain.ProductID]domain.CouponCounts{}
	known := map[domain.ProductID]bool{}
	out := make([]CouponListing, len(all))
	for i, c := range all {
		out[i] = CouponListing{Coupon: c, Uses: make([]CouponUses, len(c.Products))}
		for j, p := range c.Products {
			if _, asked := known[p]; !asked {
				cc, err := s.gate.CouponCounts(ctx, p)
				if err != nil {
					s.log.WarnContext(ctx, "coupon uses unknown: the stock gate did not answer", "product", p, "err", err)
				}
				counts[p], known[p] = cc, err == nil
			}
			out[i].Uses[j] = CouponUses{Product: p, Uses: counts[p][c.Code].Uses, Known: known[p]}
		}
	}
	return out, nil
}

// DisableCoupon withdraws a coupon: orders are refused it as if it did not exist (new ones;
// the orders that carry it keep their discount). This instance applies it at once, the others
// within CouponCacheTTL.
//
// Errors: ErrCouponNotFound, ErrUnavailable.
func (s *Coupons) DisableCoupon(ctx context.Context, code domain.CouponCode) error {
	return s.setDisabled(ctx, code, true)
}

// EnableCoupon offers a disabled coupon again, with the uses it had (they are counted in the
// gate, not reset). Timing and errors as DisableCoupon's.
func (s *Coupons) EnableCoupon(ctx context.Context, code domain.CouponCode) error {
	return s.setDisabled(ctx, code, false)
}

func (s *Coupons) setDisabled(ctx context.Context, code domain.CouponCode, disabled bool) error {
	err := s.ledger.Coupons().SetCouponDisabled(ctx, code, disabled)
	// Forgotten even when the write failed: its outcome may be unknown (a lost commit answer).
	s.coupons.forget(code)
	if err != nil {
		return fmt.Errorf("set coupon %s disabled=%v: %w", code, disabled, err)
	}
	return nil
}

// couponCache is an instance's short-lived copy of the coupons orders name, unknown codes
// included, so that a storm of orders with one coupon (or with guessed codes) reads the ledger
// about once per code per CouponCacheTTL rather than once per order.
type couponCache struct {
	mu      sync.RWMutex
	entries map[domain.CouponCode]cachedCoupon
	swept   time.Time     // the last sweep of expired entries (when the cache was full)
	gen     atomic.Uint64 // counts changes made here: a read that raced one is not cached
}

type cachedCoupon struct {
	c       domain.Coupon
	found   bool
	expires time.Time
}

func (cc *couponCache) get(code domain.CouponCode, now time.Time) (cachedCoupon, bool) {
	cc.mu.RLock()
	defer cc.mu.RUnlock()
	e, ok := cc.entries[code]
	return e, ok && now.Before(e.expires)
}

func (cc *couponCache) put(code domain.CouponCode, e cachedCoupon, gen uint64, now time.Time) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.gen.Load() != gen {
		return // a change made here meanwhile: e may predate it
	}
	if cc.entries == nil {
		cc.entries = make(map[domain.CouponCode]cachedCoupon)
	}
	if _, had := cc.entries[code]; !had && len(cc.entries) >= maxCachedCoupons {
		// Swept at most once per TTL: a flood of guessed codes does not scan the map per order.
		if now.Before(cc.swept.Add(CouponCacheTTL)) {
			return
		}
		cc.swept = now
		for k, old := range cc.entries {
			if !now.Before(old.expires) {
				delete(cc.entries, k)
			}
		}
		if len(cc.entries) >= maxCachedCoupons {
			return
		}
	}
	cc.entries[code] = e
}

// forget drops code's entry after a change made through this instance.
func (cc *couponCache) forget(code domain.CouponCode) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.gen.Add(1)
	delete(cc.entries, code)
}

// couponFor returns the coupon an order names, from the instance's cache or, when absent or
// older than CouponCacheTTL, the ledger. A disabled coupon answers as an unknown one:
// ErrCouponNotFound (a buyer cannot tell one withdrawn from one that never was). Its terms
// (products, times, amount) are the caller's to check with Coupon.Discount, and its uses the
// gate's to count.
//
// Errors: ErrCouponNotFound, ErrUnavailable.
func (s *stock) couponFor(ctx context.Context, code domain.CouponCode) (domain.Coupon, error) {
	c, err := s.couponTerms(ctx, code)
	if err == nil && c.Disabled {
		return domain.Coupon{}, fmt.Errorf("coupon %s: %w", code, domain.ErrCouponNotFound)
	}
	return c, err
}

// couponTerms is couponFor with a disabled coupon returned as it is: the terms an order that
// carries it was placed under (a late payment claims its use again within its limits, whether
// it was disabled since or not). ErrCouponNotFound only for an unknown code.
func (s *stock) couponTerms(ctx context.Context, code domain.CouponCode) (domain.Coupon, error) {
	now := s.clock.Now()
	e, ok := s.coupons.get(code, now)
	if !ok {
		gen := s.coupons.gen.Load()
		c, err := s.ledger.Coupons().Coupon(ctx, code)
		switch {
		case err == nil:
			e = cachedCoupon{c: c, found: true}
		case errors.Is(err, domain.ErrCouponNotFound):
			e = cachedCoupon{}
		default:
			return domain.Coupon{}, fmt.Errorf("load coupon: %w", err)
		}
		e.expires = now.Add(CouponCacheTTL)
		s.coupons.put(code, e, gen, now)
	}
	if !e.found {
		return domain.Coupon{}, fmt.Errorf("coupon %s: %w", code, domain.ErrCouponNotFound)
	}
	return e.c, nil
}
