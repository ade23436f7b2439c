package redisgate

// Holds: tracking reservations until their units follow an order (holds.lua, forget.lua,
// release.lua).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
)

// forgetChunk bounds the order numbers of one forget.lua run (Lua's unpack has a stack limit).
const forgetChunk = 1000

// Holds lists up to limit of the product's holds taken at least minAge ago by Redis's clock
// (to the millisecond), oldest first, with their qty, buyer and coupon (holds.lua: one atomic
// read of the sorted set and the hashes, the cutoff from TIME). An error reaching Redis wraps
// domain.ErrUnavailable; a malformed reply is a plain error.
func (g *Gate) Holds(ctx context.Context, p domain.ProductID, minAge time.Duration, limit int) ([]domain.Hold, error) {
	if limit <= 0 {
		return nil, nil
	}
	reply, err := holdsScript.Run(ctx, g.c, []string{g.ks.holdsKey(p), g.ks.holdInfoKey(p), g.ks.holdBuyerKey(p), g.ks.holdCouponKey(p)},
		strconv.FormatInt(max(minAge.Milliseconds(), 0), 10), strconv.Itoa(limit)).StringSlice()
	if err != nil {
		return nil, wrap("holds", err)
	}
	if len(reply)%holdValues != 0 {
		return nil, fmt.Errorf("redis gate holds: reply of %d values, want %d a hold", len(reply), holdValues)
	}
	out := make([]domain.Hold, 0, len(reply)/holdValues)
	for i := 0; i < len(reply); i += holdValues {
		if reply[i+2] == "" {
			continue // a member without info: nothing to release it with (never written so)
		}
		h, err := g.ks.decodeHold(p, reply[i:i+holdValues])
		if err != nil {
			return nil, fmt.Errorf("redis gate holds: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// holdValues is how many values holds.lua and fence.lua list a hold with: member, score, info,
// buyer, coupon.
const holdValues = 5

// decodeHold reads a hold from its member, score, <qty>|<claim key>, buyer and coupon (the
// last two "" for none); a hold made by a keyless claim (idem:ref:) is a late re-reservation.
func (ks keyspace) decodeHold(p domain.ProductID, v []string) (domain.Hold, error) {
	member, score, info := v[0], v[1], v[2]
	ms, err := strconv.ParseFloat(score, 64)
	if err != nil {
		return domain.Hold{}, fmt.Errorf("score %q of %s: %w", score, member, err)
	}
	qty, claim, err := parseHoldInfo(info)
	if err != nil {
		return domain.Hold{}, fmt.Errorf("%s: %w", member, err)
	}
	return domain.Hold{Product: p, OrderNo: domain.OrderNo(member), Qty: qty, At: time.UnixMilli(int64(ms)),
		Late: strings.HasPrefix(claim, string(ks)+refClaim), Buyer: domain.BuyerID(v[3]), Coupon: domain.CouponCode(v[4])}, nil
}

// parseHoldInfo splits a hold's <qty>|<claim key>.
func parseHoldInfo(v string) (qty int, claim string, err error) {
	q, claim, ok := strings.Cut(v, claimSep)
	if ok {
		qty, err = strconv.Atoi(q)
	}
	if !ok || err != nil || qty < 1 || claim == "" {
		return 0, "", fmt.Errorf("malformed hold info %q", v)
	}
	return qty, claim, nil
}

// Forget stops tracking the holds of these orders of the product (forget.lua, in chunks);
// unknown numbers are ignored, and the coupon uses they claimed stay counted (they follow the
// orders now). An error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) Forget(ctx context.Context, p domain.ProductID, nos []domain.OrderNo) error {
	for start := 0; start < len(nos); start += forgetChunk {
		chunk := nos[start:min(start+forgetChunk, len(nos))]
		args := make([]any, len(chunk))
		for i, no := range chunk {
			args[i] = string(no)
		}
		keys := []string{g.ks.holdsKey(p), g.ks.holdInfoKey(p), g.ks.holdBuyerKey(p), g.ks.holdCouponKey(p)}
		if err := forgetScript.Run(ctx, g.c, keys, args...).Err(); err != nil {
			return wrap("forget", err)
		}
	}
	return nil
}

// ReleaseOrphan gives back a hold whose order was never written (release.lua): if it is still
// tracked, it is removed, its units return from sold to stock when the product's counters
// exist, its coupon use goes back, and its claim is deleted if it still points at the order;
// true only for the call that
// released it. The claim's name is read from the hold first (HGET), because a script may only
// touch the keys it is given. An error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) ReleaseOrphan(ctx context.Context, h domain.Hold) (bool, error) {
	info, err := g.c.HGet(ctx, g.ks.holdInfoKey(h.Product), string(h.OrderNo)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, wrap("release orphan", err)
	}
	_, claim, err := parseHoldInfo(info)
	if err != nil {
		return false, fmt.Errorf("redis gate release orphan %s: %w", h.OrderNo, err)
	}
	n, err := releaseScript.Run(ctx, g.c, []string{g.ks.stockKey(h.Product), g.ks.soldKey(h.Product), g.ks.holdsKey(h.Product),
		g.ks.holdInfoKey(h.Product), claim, g.ks.fenceKey(h.Product), g.ks.rulesKey(h.Product), g.ks.heldKey(h.Product),
		g.ks.holdBuyerKey(h.Product), g.ks.couponUseKey(h.Product), g.ks.couponBuyerKey(h.Product), g.ks.holdCouponKey(h.Product)},
		string(h.OrderNo)).Int64()
	if err != nil {
		return false, wrap("release orphan", err)
	}
	if n == fenced {
		return false, domain.ErrGateRebuilding
	}
	return n == 1, nil
}
