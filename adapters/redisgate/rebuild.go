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

// Rebuild overwrites the product's counters and frozen flag and drops its holds in one step
// (rebuild.lua); claims, budgets and markers are kept. An error reaching Redis wraps
// domain.ErrUnavailable.
func (g *Gate) Rebuild(ctx context.Context, p domain.ProductID, l domain.GateLevels) error {
	frozen := "0"
	if l.Frozen {
		frozen = "1"
	}
	err := rebuildScript.Run(ctx, g.c, []string{stockKey(p), soldKey(p), frozenKey(p), holdsKey(p), holdInfoKey(p),
		heldKey(p), holdBuyerKey(p)},
		strconv.FormatInt(l.Stock, 10), strconv.FormatInt(l.Sold, 10), frozen).Err()
	return wrap("rebuild", err)
}

// BeginRebuild fences the product under token for ttl and lists all of its holds in the same
// step (fence.lua). A fence held under another token is domain.ErrGateRebuilding; an error
// reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) BeginRebuild(ctx context.Context, p domain.ProductID, token string, ttl time.Duration) ([]domain.Hold, error) {
	if token == "" || ttl <= 0 {
		return nil, domain.Invalid("token", "a rebuild needs a token and a positive fence time")
	}
	reply, err := fenceScript.Run(ctx, g.c, []string{fenceKey(p), holdsKey(p), holdInfoKey(p)},
		token, strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)).Slice()
	if err != nil {
		return nil, wrap("begin rebuild", err)
	}
	if len(reply) == 0 || (len(reply)-1)%3 != 0 {
		return nil, fmt.Errorf("redis gate begin rebuild: reply of %d values, want 1 + triples", len(reply))
	}
	if ok, _ := reply[0].(int64); ok != 1 {
		return nil, domain.ErrGateRebuilding
	}
	out := make([]domain.Hold, 0, (len(reply)-1)/3)
	for i := 1; i < len(reply); i += 3 {
		member, _ := reply[i].(string)
		score, _ := reply[i+1].(string)
		info, _ := reply[i+2].(string)
		if info == "" {
			continue // a member without info: nothing to account it by (never written so)
		}
		h, err := decodeHold(p, member, score, info)
		if err != nil {
			return nil, fmt.Errorf("redis gate begin rebuild: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// FinishRebuild writes the plan and lifts the fence in one step (finish.lua), if the fence is
// still held under plan.Token; otherwise it writes nothing and returns
// domain.ErrGateRebuilding. An error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) FinishRebuild(ctx context.Context, p domain.ProductID, plan domain.RebuildPlan) error {
	frozen := "0"
	if plan.Levels.Frozen {
		frozen = "1"
	}
	if err := plan.Rules.Check(); err != nil {
		return err
	}
	keys := []string{stockKey(p), soldKey(p), frozenKey(p), fenceKey(p), holdsKey(p), holdInfoKey(p),
		rulesKey(p), heldKey(p), holdBuyerKey(p)}
	for _, ref := range plan.Counted {
		keys = append(keys, markerKey(domain.GateChange{Product: p, Ref: ref}))
	}
	starts, ends, limit := rulesArgs(plan.Rules)
	args := []any{plan.Token, strconv.FormatInt(plan.Levels.Stock, 10), strconv.FormatInt(plan.Levels.Sold, 10),
		frozen, strconv.FormatInt(MarkerTTL.Milliseconds(), 10), starts, ends, limit, strconv.Itoa(len(plan.Drop))}
	for _, no := range plan.Drop {
		args = append(args, string(no))
	}
	if plan.Rules.BuyerLimit > 0 {
		for b, n := range plan.Held {
			if n > 0 {
				args = append(args, string(b), strconv.FormatInt(n, 10))
			}
		}
	}
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
	return wrap("abort rebuild", unfenceScript.Run(ctx, g.c, []string{fenceKey(p)}, token).Err())
}
