package memory

// Rebuilding a product's counters: unfenced for a new product, fenced while the shop runs.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cardshop/domain"
)

// fence is a rebuild in progress (BeginRebuild).
type fence struct {
	token     string
	expiresAt time.Time
}

// fenced reports whether a rebuild holds the product's fence at now (an expired one is dropped).
func (g *Gate) fenced(p domain.ProductID, now time.Time) (fence, bool) {
	f, ok := g.fences[p]
	if ok && !now.Before(f.expiresAt) {
		delete(g.fences, p)
		return fence{}, false
	}
	return f, ok
}

// Rebuild overwrites the product's counters and frozen flag and drops its holds (the ledger's
// numbers do not count reservations without an order) and coupon counts; claims, markers and
// budgets are kept.
func (g *Gate) Rebuild(_ context.Context, p domain.ProductID, l domain.GateLevels) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.products[p] = gateCounters{stock: l.Stock, sold: l.Sold, frozen: l.Frozen, exists: true}
	delete(g.holds, p)
	delete(g.held, p)
	delete(g.coupons, p)
	return nil
}

// BeginRebuild fences the product under token until FinishRebuild, AbortRebuild or ttl, and
// returns every hold of the product.
func (g *Gate) BeginRebuild(_ context.Context, p domain.ProductID, token string, ttl time.Duration) ([]domain.Hold, error) {
	if token == "" || ttl <= 0 {
		return nil, domain.Invalid("token", "a rebuild needs a token and a positive fence time")
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.fenced(p, now); ok && f.token != token {
		return nil, domain.ErrGateRebuilding
	}
	g.fences[p] = fence{token: token, expiresAt: now.Add(ttl)}
	out := make([]domain.Hold, 0, len(g.holds[p]))
	for no, h := range g.holds[p] {
		out = append(out, h.public(p, no))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OrderNo < out[j].OrderNo })
	return out, nil
}

// FinishRebuild writes the plan and lifts the fence, if the fence is still held under its token.
// The coupon counts become plan.Coupons (which counts the holds still tracked).
func (g *Gate) FinishRebuild(_ context.Context, p domain.ProductID, plan domain.RebuildPlan) error {
	for code := range plan.Coupons {
		if err := checkCoupon(code); err != nil || code == "" {
			return domain.Invalid("coupon", fmt.Sprintf("%q is no coupon code", code))
		}
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.fenced(p, now); !ok || f.token != plan.Token {
		return domain.ErrGateRebuilding
	}
	c := g.products[p]
	g.products[p] = gateCounters{stock: plan.Levels.Stock, sold: plan.Levels.Sold,
		frozen: c.frozen || plan.Levels.Frozen, exists: true}
	for _, no := range plan.Drop {
		delete(g.holds[p], no)
	}
	g.rules[p] = plan.Rules
	delete(g.held, p)
	if plan.Rules.BuyerLimit > 0 {
		for b, n := range plan.Held {
			g.addHeld(p, b, n)
		}
		for _, h := range g.holds[p] { // in flight: not in the ledger's sums
			g.addHeld(p, h.buyer, h.qty)
		}
	}
	delete(g.coupons, p)
	for code, cc := range plan.Coupons {
		g.addCoupon(p, code, "", max(cc.Uses, 0))
		for b, n := range cc.Buyers {
			if n > 0 && b != "" {
				g.couponsOf(p).byBuyer[couponBuyer{code: code, buyer: b}] = n
			}
		}
	}
	for _, ref := range plan.Counted {
		g.markers[markerKey{product: p, ref: ref}] = now.Add(MarkerTTL)
	}
	delete(g.fences, p)
	g.wrote(now)
	return nil
}

// AbortRebuild lifts the fence if it is still held under token.
func (g *Gate) AbortRebuild(_ context.Context, p domain.ProductID, token string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.fences[p]; ok && f.token == token {
		delete(g.fences, p)
	}
	return nil
}
