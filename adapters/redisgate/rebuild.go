package redisgate

// Rebuilding a product's counters: unfenced for a new product (rebuild.lua), fenced while the
// shop runs (fence.lua, finish.lua, unfence.lua).

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"cardshop/domain"
)

// Rebuild overwrites the product's counters and frozen flag and drops its holds and coupon
// counts in one step (rebuild.lua); claims, budgets and markers are kept. An error reaching
// Redis wraps domain.ErrUnavailable.
func (g *Gate) Rebuild(ctx context.Context, p domain.ProductID, l domain.GateLevels) error {
	frozen := "0"
	if l.Frozen {
		frozen = "1"
	}
	err := rebuildScript.Run(ctx, g.c, []string{g.ks.stockKey(p), g.ks.soldKey(p), g.ks.frozenKey(p), g.ks.holdsKey(p), g.ks.holdInfoKey(p),
		g.ks.heldKey(p), g.ks.holdBuyerKey(p), g.ks.couponUseKey(p), g.ks.couponBuyerKey(p), g.ks.holdCouponKey(p)},
		strconv.FormatInt(l.Stock, 10), strconv.FormatInt(l.Sold, 10), frozen).Err()
	return wrap("rebuild", err)
}

// BeginRebuild fences the product under token for ttl and lists all of its holds in the same
// step (fence.lua), each with its buyer and coupon. A fence held under another token is
// domain.ErrGateRebuilding; an error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) BeginRebuild(ctx context.Context, p domain.ProductID, token string, ttl time.Duration) ([]domain.Hold, error) {
	if token == "" || ttl <= 0 {
		return nil, domain.Invalid("token", "a rebuild needs a token and a positive fence time")
	}
	reply, err := fenceScript.Run(ctx, g.c, []string{g.ks.fenceKey(p), g.ks.holdsKey(p), g.ks.holdInfoKey(p), g.ks.holdBuyerKey(p), g.ks.holdCouponKey(p)},
		token, strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)).Slice()
	if err != nil {
		return nil, wrap("begin rebuild", err)
	}
	if len(reply) == 0 || (len(reply)-1)%holdValues != 0 {
		return nil, fmt.Errorf("redis gate begin rebuild: reply of %d values, want 1 + %d a hold", len(reply), holdValues)
	}
	if ok, _ := reply[0].(int64); ok != 1 {
		return nil, domain.ErrGateRebuilding
	}
	out := make([]domain.Hold, 0, (len(reply)-1)/holdValues)
	v := make([]string, holdValues)
	for i := 1; i < len(reply); i += holdValues {
		for j := range v {
			v[j], _ = reply[i+j].(string)
		}
		if v[2] == "" {
			continue // a member without info: nothing to account it by (never written so)
		}
		h, err := g.ks.decodeHold(p, v)
		if err != nil {
			return nil, fmt.Errorf("redis gate begin rebuild: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// FinishRebuild writes the plan and lifts the fence in one step (finish.lua), if the fence is
// still held under plan.Token; otherwise it writes nothing and returns
// domain.ErrGateRebuilding. The coupon counts become plan.Coupons' positive counts (which
// already count the holds still tracked). A malformed coupon code in plan.Coupons is a
// domain.ValidationError. An error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) FinishRebuild(ctx context.Context, p domain.ProductID, plan domain.RebuildPlan) error {
	frozen := "0"
	if plan.Levels.Frozen {
		frozen = "1"
	}
	if err := plan.Rules.Check(); err != nil {
		return err
	}
	keys := []string{g.ks.stockKey(p), g.ks.soldKey(p), g.ks.frozenKey(p), g.ks.fenceKey(p), g.ks.holdsKey(p), g.ks.holdInfoKey(p),
		g.ks.rulesKey(p), g.ks.heldKey(p), g.ks.holdBuyerKey(p), g.ks.couponUseKey(p), g.ks.couponBuyerKey(p), g.ks.holdCouponKey(p)}
	for _, ref := range plan.Counted {
		keys = append(keys, g.ks.markerKey(domain.GateChange{Product: p, Ref: ref}))
	}
	starts, ends, limit := rulesArgs(plan.Rules)
	var held, uses, buyers []any
	if plan.Rules.BuyerLimit > 0 {
		for b, n := range plan.Held {
			if n > 0 {
				held = append(held, string(b), strconv.FormatInt(n, 10))
			}
		}
	}
	for code, cc := range plan.Coupons {
		if err := checkCoupon(code); err != nil || code == "" {
			return domain.Invalid("coupon", fmt.Sprintf("%q is no coupon code", code))
		}
		if cc.Uses > 0 {
			uses = append(uses, string(code), strconv.FormatInt(cc.Uses, 10))
		}
		for b, n := range cc.Buyers {
			if n > 0 && b != "" {
				buyers = append(buyers, string(code)+couponSep+string(b), strconv.FormatInt(n, 10))
			}
		}
	}
	args := []any{plan.Token, strconv.FormatInt(plan.Levels.Stock, 10), strconv.FormatInt(plan.Levels.Sold, 10),
		frozen, strconv.FormatInt(MarkerTTL.Milliseconds(), 10), starts, ends, limit, strconv.Itoa(len(plan.Drop)),
		strconv.Itoa(len(held) / 2), strconv.Itoa(len(uses) / 2)}
	for _, no := range plan.Drop {
		args = append(args, string(no))
	}
	args = append(append(append(args, held...), uses...), buyers...)
	n, err := finishScript.Run(ctx, g.c, keys, args...).Int64()
	if err != nil {
		return wrap("finish rebuild", err)
	}
	if n != 1 {
		return domain.ErrGateRebuilding
	}
	return nil
}

// AbortRebuild lifts the fence if it is still held under token (unfence.lua). An error
// reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) AbortRebuild(ctx context.Context, p domain.ProductID, token string) error {
	return wrap("abort rebuild", unfenceScript.Run(ctx, g.c, []string{g.ks.fenceKey(p)}, token).Err())
}
