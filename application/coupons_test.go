package application_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// couponGate is the memory gate with coupon counts set by the test; a product in down
// answers as an unreachable gate.
type couponGate struct {
	*memory.Gate
	mu     sync.Mutex
	counts map[domain.ProductID]domain.CouponCounts
	down   map[domain.ProductID]bool
	calls  map[domain.ProductID]int
}

func (g *couponGate) CouponCounts(_ context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[p]++
	if g.down[p] {
		return nil, domain.ErrUnavailable
	}
	return g.counts[p], nil
}

// couponLedger counts the coupon reads by code and fails them while failing is set.
type couponLedger struct {
	*memory.Ledger
	reads   *atomic.Int64
	failing *atomic.Bool
}

func (l couponLedger) Coupons() domain.CouponStore {
	return countedCoupons{CouponStore: l.Ledger.Coupons(), reads: l.reads, failing: l.failing}
}

type countedCoupons struct {
	domain.CouponStore
	reads   *atomic.Int64
	failing *atomic.Bool
}

func (c countedCoupons) Coupon(ctx context.Context, code domain.CouponCode) (domain.Coupon, error) {
	c.reads.Add(1)
	if c.failing.Load() {
		return domain.Coupon{}, domain.ErrUnavailable
	}
	return c.CouponStore.Coupon(ctx, code)
}

func percentCoupon(code string, products ...domain.ProductID) domain.Coupon {
	return domain.Coupon{Code: domain.CouponCode(code), Kind: domain.CouponPercent, Value: 10, Products: products,
		UsesPerProduct: 100, UsesPerBuyer: 1}
}

func listCoupons(t *testing.T, f *fixture) []application.CouponListing {
	t.Helper()
	all, err := f.shop.Coupons.Coupons(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func TestCreateCouponStoresItNormalisedAndEnabled(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 0)
	c := percentCoupon("  spring-10 ", p.ID(), p.ID())
	c.Disabled = true // a new coupon is always enabled
	got, err := f.shop.Coupons.CreateCoupon(f.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != "SPRING-10" || got.Disabled || !got.CreatedAt.Equal(t0) || len(got.Products) != 1 || got.Products[0] != p.ID() {
		t.Fatalf("CreateCoupon = %+v; want code SPRING-10, enabled, created at %v, product %d once", got, t0, p.ID())
	}
	all := listCoupons(t, f)
	if len(all) != 1 || all[0].Code != "SPRING-10" || all[0].Value != 10 || all[0].UsesPerBuyer != 1 {
		t.Fatalf("Coupons = %+v, want the new coupon", all)
	}
}

func TestCreateCouponRefusalsChangeNothing(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 0)
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("TAKEN", p.ID())); err != nil {
		t.Fatal(err)
	}
	missing := p.ID() + 1000
	for _, c := range []struct {
		name  string
		in    domain.Coupon
		want  error
		field string
	}{
		{"bad code", percentCoupon("no spaces", p.ID()), domain.ErrInvalidInput, "code"},
		{"percent of 100", func() domain.Coupon { c := percentCoupon("HUNDRED", p.ID()); c.Value = 100; return c }(), domain.ErrInvalidInput, "value"},
		{"no products", percentCoupon("NONE"), domain.ErrInvalidInput, "products"},
		{"a product that does not exist", percentCoupon("GHOST", p.ID(), missing), domain.ErrProductNotFound, "products"},
		{"a taken code", percentCoupon("taken", p.ID()), domain.ErrCouponExists, ""},
	} {
		_, err := f.shop.Coupons.CreateCoupon(f.ctx, c.in)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: err = %v, want %v", c.name, err, c.want)
		}
		var ve *domain.ValidationError
		if c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field) {
			t.Fatalf("%s: err = %v, want a validation error of %s", c.name, err, c.field)
		}
		if all := listCoupons(t, f); len(all) != 1 || all[0].Code != "TAKEN" || all[0].Value != 10 {
			t.Fatalf("%s changed the coupons: %+v", c.name, all)
		}
	}
	_, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("GHOST", p.ID(), missing))
	if !errors.Is(err, domain.ErrInvalidInput) || !strings.Contains(err.Error(), fmt.Sprintf("product %d", missing)) {
		t.Fatalf("a missing product: err = %v; want invalid input naming product %d", err, missing)
	}
}

func TestCouponListShowsUsesPerProductFromTheGate(t *testing.T) {
	var gate *couponGate
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate {
		gate = &couponGate{Gate: g, calls: map[domain.ProductID]int{}, down: map[domain.ProductID]bool{}}
		return gate
	}))
	p1, p2, p3 := f.createProduct(t, 5, 0).ID(), f.createProduct(t, 5, 0).ID(), f.createProduct(t, 5, 0).ID()
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("OLDER", p1, p2, p3)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(1)
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("NEWER", p2)); err != nil {
		t.Fatal(err)
	}
	gate.counts = map[domain.ProductID]domain.CouponCounts{
		p1: {"OLDER": {Uses: 3}},
		p2: {"OLDER": {Uses: 1}, "NEWER": {Uses: 5, Buyers: map[domain.BuyerID]int64{"b": 5}}},
	}
	gate.down[p3] = true
	all := listCoupons(t, f)
	if len(all) != 2 || all[0].Code != "NEWER" || all[1].Code != "OLDER" {
		t.Fatalf("Coupons = %+v, want NEWER then OLDER", all)
	}
	want := map[domain.CouponCode][]application.CouponUses{
		"NEWER": {{Product: p2, Uses: 5, Known: true}},
		"OLDER": {{Product: p1, Uses: 3, Known: true}, {Product: p2, Uses: 1, Known: true}, {Product: p3, Uses: 0, Known: false}},
	}
	for _, c := range all {
		if got := c.Uses; !equalUses(got, want[c.Code]) {
			t.Errorf("%s uses = %+v, want %+v", c.Code, got, want[c.Code])
		}
	}
	for p, n := range gate.calls {
		if n != 1 {
			t.Errorf("product %d's gate asked %d times, want once", p, n)
		}
	}
}

func equalUses(a, b []application.CouponUses) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDisableAndEnableCoupon(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 0).ID()
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("FLIP", p)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.shop.CouponFor(f.ctx, "FLIP"); err != nil {
		t.Fatalf("an enabled coupon: %v", err)
	}
	for _, unknown := range []func(context.Context, domain.CouponCode) error{f.shop.Coupons.DisableCoupon, f.shop.Coupons.EnableCoupon} {
		if err := unknown(f.ctx, "NOPE"); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatalf("an unknown code: err = %v, want ErrCouponNotFound", err)
		}
	}
	if err := f.shop.Coupons.DisableCoupon(f.ctx, "FLIP"); err != nil {
		t.Fatal(err)
	}
	// On the instance that disabled it at once, the cache notwithstanding; and as unknown.
	if _, err := f.shop.CouponFor(f.ctx, "FLIP"); !errors.Is(err, domain.ErrCouponNotFound) {
		t.Fatalf("a disabled coupon: err = %v, want ErrCouponNotFound", err)
	}
	if all := listCoupons(t, f); len(all) != 1 || !all[0].Disabled {
		t.Fatalf("Coupons = %+v, want FLIP disabled", all)
	}
	if err := f.shop.Coupons.EnableCoupon(f.ctx, "FLIP"); err != nil {
		t.Fatal(err)
	}
	if c, err := f.shop.CouponFor(f.ctx, "FLIP"); err != nil || c.Code != "FLIP" || c.Disabled {
		t.Fatalf("enabled again: %+v, %v", c, err)
	}
}

func TestCouponForReadsTheLedgerOncePerTTL(t *testing.T) {
	var reads atomic.Int64
	var failing atomic.Bool
	f := newFixture(t, withLedger(func(l *memory.Ledger) domain.Ledger {
		return couponLedger{Ledger: l, reads: &reads, failing: &failing}
	}))
	p := f.createProduct(t, 5, 0).ID()
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("HOT", p)); err != nil {
		t.Fatal(err)
	}
	// A storm on one instance: one read.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if c, err := f.shop.CouponFor(f.ctx, "HOT"); err != nil || c.Code != "HOT" {
				t.Errorf("CouponFor(HOT) = %+v, %v", c, err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n < 1 || n > 50 {
		t.Fatalf("%d reads for 50 concurrent orders", n)
	}
	before := reads.Load()
	for range 10 {
		if _, err := f.shop.CouponFor(f.ctx, "HOT"); err != nil {
			t.Fatal(err)
		}
	}
	if reads.Load() != before {
		t.Fatalf("cached reads reached the ledger: %d reads, want %d", reads.Load(), before)
	}

	// Another instance disables it (straight in the ledger): seen here after the TTL.
	if err := f.ledger.Coupons().SetCouponDisabled(f.ctx, "HOT", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.shop.CouponFor(f.ctx, "HOT"); err != nil {
		t.Fatalf("within the TTL the cached copy answers: %v", err)
	}
	f.clock.Advance(application.CouponCacheTTL)
	if _, err := f.shop.CouponFor(f.ctx, "HOT"); !errors.Is(err, domain.ErrCouponNotFound) {
		t.Fatalf("after the TTL: err = %v, want ErrCouponNotFound", err)
	}

	// An unknown code is cached too, until this instance creates it.
	before = reads.Load()
	for range 5 {
		if _, err := f.shop.CouponFor(f.ctx, "LATER"); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatalf("unknown: err = %v", err)
		}
	}
	if reads.Load() != before+1 {
		t.Fatalf("an unknown code read %d times, want once", reads.Load()-before)
	}
	if _, err := f.shop.Coupons.CreateCoupon(f.ctx, percentCoupon("LATER", p)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.shop.CouponFor(f.ctx, "LATER"); err != nil {
		t.Fatalf("created here, known here at once: %v", err)
	}

	// A ledger that fails is never cached: the next order asks again.
	f.clock.Advance(application.CouponCacheTTL)
	failing.Store(true)
	if _, err := f.shop.CouponFor(f.ctx, "LATER"); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a failing ledger: err = %v, want ErrUnavailable", err)
	}
	failing.Store(false)
	if _, err := f.shop.CouponFor(f.ctx, "LATER"); err != nil {
		t.Fatalf("the ledger back: %v", err)
	}
}

// Guessed codes fill the cache to its bound and no further: beyond it a code is read each
// time, until the entries expire and a sweep makes room again.
func TestCouponCacheIsBounded(t *testing.T) {
	var reads atomic.Int64
	var failing atomic.Bool
	f := newFixture(t, withLedger(func(l *memory.Ledger) domain.Ledger {
		return couponLedger{Ledger: l, reads: &reads, failing: &failing}
	}))
	for i := range application.MaxCachedCoupons {
		if _, err := f.shop.CouponFor(f.ctx, domain.CouponCode(fmt.Sprintf("GUESS-%d", i))); !errors.Is(err, domain.ErrCouponNotFound) {
			t.Fatal(err)
		}
	}
	lookTwice := func() int64 {
		before := reads.Load()
		for range 2 {
			if _, err := f.shop.CouponFor(f.ctx, "ONE-MORE"); !errors.Is(err, domain.ErrCouponNotFound) {
				t.Fatal(err)
			}
		}
		return reads.Load() - before
	}
	if n := lookTwice(); n != 2 {
		t.Fatalf("a code beyond the bound was read %d times for two orders, want 2 (not cached)", n)
	}
	f.clock.Advance(application.CouponCacheTTL)
	if n := lookTwice(); n != 1 {
		t.Fatalf("after the entries expired: %d reads for two orders, want 1 (cached again)", n)
	}
}
