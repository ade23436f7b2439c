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

// Gate is an in-memory domain.StockGate with the same semantics as the Redis+Lua gate: every
// operation is atomic under one mutex, as every script is atomic in Redis.
type Gate struct {
	clock domain.Clock

	mu       sync.Mutex
	products map[domain.ProductID]gateCounters
	claims   map[claimKey]claim
	markers  map[markerKey]time.Time // ref -> expiry
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
	return nil
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
}

// Reserve claims the reservation's key (or Ref) and takes its units in one atomic step.
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
	switch {
	case !c.exists:
		return domain.ReserveResult{Outcome: domain.GateMissing}, nil
	case c.frozen:
		return domain.ReserveResult{Outcome: domain.Frozen, Left: c.stock}, nil
	case c.stock < int64(r.Qty):
		return domain.ReserveResult{Outcome: domain.SoldOut, Left: c.stock}, nil
	}
	c.stock -= int64(r.Qty)
	c.sold += int64(r.Qty)
	g.products[r.Product] = c
	g.claims[k] = claim{orderNo: r.OrderNo, fingerprint: r.Fingerprint, qty: int64(r.Qty), expiresAt: now.Add(ttl)}
	g.wrote(now)
	return domain.ReserveResult{Outcome: domain.Reserved, Left: c.stock}, nil
}

// Cancel undoes a reservation whose order could not be written: if the claim for its key (or
// Ref) is still live and points at r.OrderNo, it drops the claim, returns the units the claim
// took and reports true; otherwise it changes nothing and reports false.
func (g *Gate) Cancel(_ context.Context, r domain.Reservation) (bool, error) {
	if r.Key == "" && r.Ref == "" {
		return false, domain.Invalid("ref", "required when the idempotency key is empty")
	}
	now := g.clock.Now()
	k := claimKeyOf(r)

	g.mu.Lock()
	defer g.mu.Unlock()
	existing, ok := g.liveClaim(k, now)
	if !ok || existing.orderNo != r.OrderNo {
		return false, nil
	}
	delete(g.claims, k)
	if c := g.products[r.Product]; c.exists {
		c.stock += existing.qty
		c.sold -= existing.qty
		g.products[r.Product] = c
	}
	return true, nil
}

// Apply adds c's Stock and Sold to the product's counters once per c.Ref; it leaves a product
// the gate does not know alone and records nothing for it.
func (g *Gate) Apply(_ context.Context, c domain.GateChange) (bool, error) {
	now := g.clock.Now()
	m := markerKey{product: c.Product, ref: c.Ref}

	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.products[c.Product]
	if !p.exists || g.liveMarker(m, now) {
		return false, nil
	}
	p.stock += c.Stock
	p.sold += c.Sold
	g.products[c.Product] = p
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

// Rebuild overwrites the product's counters and frozen flag; claims and markers are kept.
func (g *Gate) Rebuild(_ context.Context, p domain.ProductID, l domain.GateLevels) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.products[p] = gateCounters{stock: l.Stock, sold: l.Sold, frozen: l.Frozen, exists: true}
	return nil
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
