package memory

import (
	"context"
	"sync"
	"time"

	"cardshop/domain"
)

// DefaultKeyTTL is how long the gate remembers an idempotency claim when a reservation does
// not say.
const DefaultKeyTTL = 10 * time.Minute

// MarkerTTL is how long the gate remembers that an Apply ref was applied.
const MarkerTTL = 7 * 24 * time.Hour

// purgeEvery is how many writes pass between sweeps of expired claims and markers, so a
// long-running gate does not keep every key it ever saw.
const purgeEvery = 4096

type gateCounters struct {
	stock, sold int64
	frozen      bool
	exists      bool // false: only the frozen flag is known (SetFrozen before Rebuild)
}

// claimKey names an idempotency claim. A keyless reservation is claimed by its Ref; keyless
// keeps that namespace apart from buyers' keys.
type claimKey struct {
	product domain.ProductID
	keyless bool
	buyer   domain.BuyerID
	key     string
}

type claim struct {
	orderNo     domain.OrderNo
	fingerprint string
	qty         int64 // units taken, returned by Cancel
	expiresAt   time.Time
}

type markerKey struct {
	product domain.ProductID
	ref     string
}

// budgetKey names a buyer's budget for one product.
type budgetKey struct {
	product domain.ProductID
	buyer   domain.BuyerID
}

// budget counts the units a buyer reserved within a window that opened with the first of them.
type budget struct {
	used      int64
	expiresAt time.Time
}

// Gate is an in-memory domain.StockGate with the same semantics as the Redis+Lua gate: every
// operation is atomic under one mutex, as every script is atomic in Redis.
type Gate struct {
	clock domain.Clock

	mu       sync.Mutex
	products map[domain.ProductID]gateCounters
	claims   map[claimKey]claim
	markers  map[markerKey]time.Time // ref -> expiry
	holds    map[domain.ProductID]map[domain.OrderNo]hold
	budgets  map[budgetKey]budget
	fences   map[domain.ProductID]fence
	rules    map[domain.ProductID]domain.SaleRules
	held     map[domain.ProductID]map[domain.BuyerID]int64 // kept only while the product has a BuyerLimit
	coupons  map[domain.ProductID]*couponUses
	writes   int
}

var _ domain.StockGate = (*Gate)(nil)

// NewGate returns an empty gate that measures claim and marker expiry with clock.
func NewGate(clock domain.Clock) *Gate {
	g := &Gate{clock: clock}
	g.reset()
	return g
}

func (g *Gate) reset() {
	g.products = make(map[domain.ProductID]gateCounters)
	g.claims = make(map[claimKey]claim)
	g.markers = make(map[markerKey]time.Time)
	g.holds = make(map[domain.ProductID]map[domain.OrderNo]hold)
	g.budgets = make(map[budgetKey]budget)
	g.fences = make(map[domain.ProductID]fence)
	g.rules = make(map[domain.ProductID]domain.SaleRules)
	g.held = make(map[domain.ProductID]map[domain.BuyerID]int64)
	g.coupons = make(map[domain.ProductID]*couponUses)
}

// addHeld adds n to the buyer's holding count of p while p has a BuyerLimit (a count that
// reaches 0 is dropped, as lua/held.lua's HDEL does).
func (g *Gate) addHeld(p domain.ProductID, buyer domain.BuyerID, n int64) {
	if buyer == "" || n == 0 || g.rules[p].BuyerLimit <= 0 {
		return
	}
	m := g.held[p]
	if m == nil {
		m = make(map[domain.BuyerID]int64)
		g.held[p] = m
	}
	if m[buyer] += n; m[buyer] <= 0 {
		delete(m, buyer)
	}
}

// SetRules replaces the product's sale rules; rules without a limit drop its holding counts.
// While the product is fenced it writes nothing and returns ErrGateRebuilding.
func (g *Gate) SetRules(_ context.Context, p domain.ProductID, r domain.SaleRules) error {
	if err := r.Check(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.fenced(p, g.clock.Now()); ok {
		return domain.ErrGateRebuilding
	}
	g.rules[p] = r
	if r.BuyerLimit <= 0 {
		delete(g.held, p)
	}
	return nil
}

// HeldCounts returns a copy of the buyers' holding counts of p.
func (g *Gate) HeldCounts(_ context.Context, p domain.ProductID) (map[domain.BuyerID]int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[domain.BuyerID]int64, len(g.held[p]))
	for b, n := range g.held[p] {
		out[b] = n
	}
	return out, nil
}

func claimKeyOf(r domain.Reservation) claimKey {
	if r.Key == "" {
		return claimKey{product: r.Product, keyless: true, key: r.Ref}
	}
	return claimKey{product: r.Product, buyer: r.Buyer, key: string(r.Key)}
}

func checkReservation(r domain.Reservation) error {
	if r.Qty < 1 {
		return domain.Invalid("qty", "must be at least 1")
	}
	if r.Key == "" && r.Ref == "" {
		// Without either, every keyless reservation of the product would share one claim.
		return domain.Invalid("ref", "required when the idempotency key is empty")
	}
	if r.Key != "" && r.BuyerCap > 0 && r.BuyerWindow <= 0 {
		return domain.Invalid("buyer_window", "must be positive when a buyer cap is set")
	}
	if err := checkCoupon(r.Coupon); err != nil {
		return err
	}
	if r.CouponUses < 0 || r.CouponPerBuyer < 0 {
		return domain.Invalid("coupon", "its limits must be 0 (none) or positive")
	}
	return nil
}

// liveBudget returns the buyer's budget unless its window has ended (ended ones are dropped).
func (g *Gate) liveBudget(k budgetKey, now time.Time) budget {
	b, ok := g.budgets[k]
	if ok && !now.Before(b.expiresAt) {
		delete(g.budgets, k)
		return budget{}
	}
	return b
}

// liveClaim returns the claim under k unless it has expired (expired claims are dropped).
func (g *Gate) liveClaim(k claimKey, now time.Time) (claim, bool) {
	c, ok := g.claims[k]
	if !ok {
		return claim{}, false
	}
	if !now.Before(c.expiresAt) {
		delete(g.claims, k)
		return claim{}, false
	}
	return c, true
}

// liveMarker reports whether the marker k exists and has not expired.
func (g *Gate) liveMarker(k markerKey, now time.Time) bool {
	exp, ok := g.markers[k]
	if !ok {
		return false
	}
	if !now.Before(exp) {
		delete(g.markers, k)
		return false
	}
	return true
}

// wrote counts a write and now and then sweeps expired claims and markers.
func (g *Gate) wrote(now time.Time) {
	g.writes++
	if g.writes%purgeEvery != 0 {
		return
	}
	for k, c := range g.claims {
		if !now.Before(c.expiresAt) {
			delete(g.claims, k)
		}
	}
	for k, exp := range g.markers {
		if !now.Before(exp) {
			delete(g.markers, k)
		}
	}
	for k, b := range g.budgets {
		if !now.Before(b.expiresAt) {
			delete(g.budgets, k)
		}
	}
}

// Reserve claims the reservation's key (or Ref) and takes its units in one atomic step; a
// keyed reservation also starts its hold and, with a BuyerCap, counts against the buyer's
// budget and the buyer's holding count, and with a coupon claims one use of it (the buyer's
// too). The checks run in reserve.lua's order: live claim, fence, missing product, frozen,
// sale window (a keyless one: its end, at r.PaidAt when set), holding limit, buyer budget
// (keyed only), the coupon's limits, stock.
func (g *Gate) Reserve(_ context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	if err := checkReservation(r); err != nil {
		return domain.ReserveResult{}, err
	}
	ttl := r.KeyTTL
	if ttl <= 0 {
		ttl = DefaultKeyTTL
	}
	now := g.clock.Now()
	k := claimKeyOf(r)

	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.products[r.Product]
	if existing, ok := g.liveClaim(k, now); ok {
		res := domain.ReserveResult{Outcome: domain.Replayed, ExistingOrder: existing.orderNo,
			ExistingFingerprint: existing.fingerprint}
		if c.exists {
			res.Left = c.stock
		}
		return res, nil
	}
	if _, ok := g.fenced(r.Product, now); ok {
		return domain.ReserveResult{Outcome: domain.Rebuilding, Left: c.stock}, nil
	}
	switch {
	case !c.exists:
		return domain.ReserveResult{Outcome: domain.GateMissing}, nil
	case c.frozen:
		return domain.ReserveResult{Outcome: domain.Frozen, Left: c.stock}, nil
	}
	rules := g.rules[r.Product]
	if r.Key != "" {
		switch rules.Phase(now) {
		case domain.SaleUpcoming:
			// To the millisecond, as reserve.lua reckons with TIME.
			wait := time.Duration(rules.StartsAt.UnixMilli()-now.UnixMilli()) * time.Millisecond
			return domain.ReserveResult{Outcome: domain.NotStarted, Left: c.stock, StartsIn: wait}, nil
		case domain.SaleOver:
			return domain.ReserveResult{Outcome: domain.Ended, Left: c.stock}, nil
		default: // open: go on
		}
	} else if !rules.EndsAt.IsZero() {
		// A late payment's order was placed inside the window: only its end is judged, at the
		// instant the payment was accepted when that is on record (to the millisecond, as
		// reserve.lua reckons).
		at := now
		if !r.PaidAt.IsZero() {
			at = r.PaidAt.Truncate(time.Millisecond)
		}
		if !at.Before(rules.EndsAt) {
			return domain.ReserveResult{Outcome: domain.Ended, Left: c.stock}, nil
		}
	}
	if rules.BuyerLimit > 0 && r.Buyer != "" && g.held[r.Product][r.Buyer]+int64(r.Qty) > int64(rules.BuyerLimit) {
		return domain.ReserveResult{Outcome: domain.HoldingLimit, Left: c.stock}, nil
	}
	capped := r.Key != "" && r.BuyerCap > 0
	bk := budgetKey{product: r.Product, buyer: r.Buyer}
	var b budget
	if capped {
		b = g.liveBudget(bk, now)
		if b.used+int64(r.Qty) > r.BuyerCap {
			return domain.ReserveResult{Outcome: domain.BuyerLimit, Left: c.stock}, nil
		}
	}
	if r.Coupon != "" {
		u := g.coupons[r.Product]
		if r.CouponUses > 0 && u.uses(r.Coupon)+1 > r.CouponUses {
			return domain.ReserveResult{Outcome: domain.CouponUsedUp, Left: c.stock}, nil
		}
		if r.Buyer != "" && r.CouponPerBuyer > 0 && u.buyerUses(r.Coupon, r.Buyer)+1 > r.CouponPerBuyer {
			return domain.ReserveResult{Outcome: domain.CouponBuyerLimit, Left: c.stock}, nil
		}
	}
	if c.stock < int64(r.Qty) {
		return domain.ReserveResult{Outcome: domain.SoldOut, Left: c.stock}, nil
	}
	c.stock -= int64(r.Qty)
	c.sold += int64(r.Qty)
	g.products[r.Product] = c
	g.claims[k] = claim{orderNo: r.OrderNo, fingerprint: r.Fingerprint, qty: int64(r.Qty), expiresAt: now.Add(ttl)}
	hs := g.holds[r.Product]
	if hs == nil {
		hs = make(map[domain.OrderNo]hold)
		g.holds[r.Product] = hs
	}
	hs[r.OrderNo] = hold{qty: int64(r.Qty), at: holdTime(now), claim: k, buyer: r.Buyer, coupon: r.Coupon}
	g.addHeld(r.Product, r.Buyer, int64(r.Qty))
	g.addCoupon(r.Product, r.Coupon, r.Buyer, 1)
	if capped {
		if b.expiresAt.IsZero() { // the first units of a new window open it
			b.expiresAt = now.Add(r.BuyerWindow)
		}
		b.used += int64(r.Qty)
		g.budgets[bk] = b
	}
	g.wrote(now)
	return domain.ReserveResult{Outcome: domain.Reserved, Left: c.stock}, nil
}

// Cancel undoes a reservation whose order could not be written: if the claim for its key (or
// Ref) is still live, points at r.OrderNo with r.Fingerprint and its hold is still tracked, it
// drops the claim and the hold, returns the units the claim took and reports true; otherwise
// it changes nothing and reports false.
func (g *Gate) Cancel(_ context.Context, r domain.Reservation) (bool, error) {
	if r.Key == "" && r.Ref == "" {
		return false, domain.Invalid("ref", "required when the idempotency key is empty")
	}
	now := g.clock.Now()
	k := claimKeyOf(r)

	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.fenced(r.Product, now); ok {
		return false, domain.ErrGateRebuilding
	}
	existing, ok := g.liveClaim(k, now)
	if !ok || existing.orderNo != r.OrderNo || existing.fingerprint != r.Fingerprint {
		return false, nil
	}
	h, held := g.holds[r.Product][r.OrderNo]
	if !held || h.claim != k {
		return false, nil // the units follow the order now (forgotten, or counted by a rebuild)
	}
	delete(g.claims, k)
	delete(g.holds[r.Product], r.OrderNo)
	g.addHeld(r.Product, h.buyer, -existing.qty)
	g.addCoupon(r.Product, h.coupon, h.buyer, -1)
	if c := g.products[r.Product]; c.exists {
		c.stock += existing.qty
		c.sold -= existing.qty
		g.products[r.Product] = c
	}
	return true, nil
}

// Apply adds c's Stock and Sold to the product's counters, its Held to the buyer's holding
// count and its CouponUses to the coupon's counts, once per c.Ref; it leaves a product the
// gate does not know alone but records c.Ref.
func (g *Gate) Apply(_ context.Context, c domain.GateChange) (bool, error) {
	if err := checkCoupon(c.Coupon); err != nil {
		return false, err
	}
	now := g.clock.Now()
	m := markerKey{product: c.Product, ref: c.Ref}

	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.fenced(c.Product, now); ok {
		return false, domain.ErrGateRebuilding
	}
	p := g.products[c.Product]
	if !p.exists {
		// Recorded all the same: the rebuild that follows counts it from the ledger (see
		// lua/apply.lua).
		g.markers[m] = now.Add(MarkerTTL)
		return false, nil
	}
	if g.liveMarker(m, now) {
		return false, nil
	}
	p.stock += c.Stock
	p.sold += c.Sold
	g.products[c.Product] = p
	g.addHeld(c.Product, c.Buyer, c.Held)
	g.addCoupon(c.Product, c.Coupon, c.Buyer, c.CouponUses)
	g.markers[m] = now.Add(MarkerTTL)
	g.wrote(now)
	return true, nil
}

// Levels returns the product's counters; ok is false when the gate has no counters for it.
func (g *Gate) Levels(_ context.Context, p domain.ProductID) (domain.GateLevels, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.products[p]
	if !c.exists {
		return domain.GateLevels{Frozen: c.frozen}, false, nil
	}
	return domain.GateLevels{Stock: c.stock, Sold: c.sold, Frozen: c.frozen}, true, nil
}

// LevelsMany returns the counters of the products the gate has counters for, read under one
// lock.
func (g *Gate) LevelsMany(_ context.Context, ids []domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[domain.ProductID]domain.GateLevels, len(ids))
	for _, p := range ids {
		if c := g.products[p]; c.exists {
			out[p] = domain.GateLevels{Stock: c.stock, Sold: c.sold, Frozen: c.frozen}
		}
	}
	return out, nil
}

// SetFrozen sets the product's frozen flag, even before the product has counters.
func (g *Gate) SetFrozen(_ context.Context, p domain.ProductID, frozen bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.products[p]
	c.frozen = frozen
	g.products[p] = c
	return nil
}

// Flush forgets everything, as Redis does when it loses its keys; for tests.
func (g *Gate) Flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reset()
}

// GateTime is the gate's clock (domain.GateClock): the clock it was made with.
func (g *Gate) GateTime(context.Context) (time.Time, error) { return g.clock.Now(), nil }
