package redisgate

// Sold-out leases: answering "sold out" without a round trip while a product's stock is gone
// (soldout.lua grants them, reserve.lua honours them). docs/DESIGN.md, "Sold-out leases", has
// the argument that such an answer is always one Redis would give.

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
	"cardshop/lua"
)

var soldOutScript = redis.NewScript(lua.SoldOut)

// claimBits is the size of a product's claim bitmap (claimbits:v1:{pid}, 16 KiB): a key whose
// bit another key shares is asked at Redis, so the size only bounds how often that happens.
// The v1 in the key's name is the hash below: a gate that hashed otherwise must use another.
const claimBits = 1 << 17

// Lease timing. A lease's end comes from Redis's clock as "ms left when the script ran"; the
// gate counts it from before it sent the script, on its own monotonic clock, shortened by
// leaseDrift (the two clocks' rates may differ by that share) and leaseMargin.
const (
	leaseDrift  = 0.01
	leaseMargin = 5 * time.Millisecond
)

// LeaseObserver receives what the sold-out leases do (package metrics implements it).
type LeaseObserver interface {
	// GateLeaseAnswer counts one reservation answered SoldOut under a lease, without Redis.
	GateLeaseAnswer()
	// GateLeaseGrant counts one lease granted by Redis (granted is true) or refused because
	// the product has stock again, is frozen, fenced or outside its sale window (false).
	GateLeaseGrant(granted bool)
}

type noLeaseObserver struct{}

func (noLeaseObserver) GateLeaseAnswer()    {}
func (noLeaseObserver) GateLeaseGrant(bool) {}

// soldOutLease is this instance's copy of one product's lease.
type soldOutLease struct {
	// until is when the copy ends, in nanoseconds of the gate's monotonic clock (Gate.now);
	// it is stored after bits, so a reader that sees a live until sees that lease's bitmap.
	until atomic.Int64
	bits  atomic.Pointer[string]
	// asking is set while a soldout.lua call for the product is in flight: one at a time.
	asking atomic.Bool
}

// WithSoldOutLease makes the gate take sold-out leases of period d (0 leaves them off): once
// Redis answers SoldOut to a new order, the gate asks for a lease, and until its copy ends it
// answers SoldOut itself to new orders whose claim bit is clear. Units given back while a
// lease stands become reservable for new orders when it ends, at most 1.25 d later (late
// payments' re-reservations are never fenced). d must not exceed the time the shop waits
// before rebuilding a product the gate lost (application.Config.RebuildDelay): Redis
// restarted empty forgets its leases, and a copy must end before orders are taken again.
func (g *Gate) WithSoldOutLease(d time.Duration, obs LeaseObserver) *Gate {
	if obs == nil {
		obs = noLeaseObserver{}
	}
	g.lease, g.leaseObs = d, obs
	return g
}

// now is the gate's monotonic clock in nanoseconds.
func (g *Gate) now() int64 { return int64(time.Since(g.start)) }

// soldOutUnderLease reports whether r, a new order (it has a key), is answered SoldOut by the
// lease this instance holds on its product: the copy has not ended and r's claim bit is clear.
func (g *Gate) soldOutUnderLease(k *productKeys, r domain.Reservation) bool {
	l := k.lease
	if l == nil || g.now() >= l.until.Load() {
		return false
	}
	bits := l.bits.Load()
	if bits == nil {
		return false
	}
	bit := claimBit(k.tag, r)
	return !bitSet(*bits, bit)
}

// askLease asks Redis for a lease on k's product in the background, unless a request for it is
// already in flight. A failure leaves the gate asking Redis per reservation, as without leases.
func (g *Gate) askLease(k *productKeys) {
	l := k.lease
	if l == nil || !l.asking.CompareAndSwap(false, true) {
		return
	}
	if g.leaseSync {
		defer l.asking.Store(false)
		_, _ = g.takeLease(context.Background(), k)
		return
	}
	go func() {
		defer l.asking.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), g.lease)
		defer cancel()
		_, _ = g.takeLease(ctx, k)
	}()
}

// takeLease runs soldout.lua for k's product and, when a lease is granted, installs this
// instance's copy of it. It reports whether a lease was granted.
func (g *Gate) takeLease(ctx context.Context, k *productKeys) (bool, error) {
	sent := g.now()
	reply, err := soldOutScript.Run(ctx, g.c, []string{k.stock, k.frozen, k.fence, k.rules, k.soldOut, k.claimBits},
		max(g.lease.Milliseconds(), 1)).Slice()
	if err != nil {
		return false, wrap("sold-out lease", err)
	}
	granted, left, bits, err := decodeLease(reply)
	if err != nil {
		return false, fmt.Errorf("redis gate sold-out lease: %w", err)
	}
	g.leaseObs.GateLeaseGrant(granted)
	if !granted {
		return false, nil
	}
	until := sent + int64(float64(left)*(1-leaseDrift)) - int64(leaseMargin)
	if until <= g.now() {
		return true, nil
	}
	k.lease.bits.Store(&bits)
	k.lease.until.Store(until)
	return true, nil
}

// decodeLease reads soldout.lua's {0} or {1, ms left, bitmap}.
func decodeLease(reply []any) (granted bool, left time.Duration, bits string, err error) {
	if len(reply) == 1 && reply[0] == int64(0) {
		return false, 0, "", nil
	}
	if len(reply) != 3 || reply[0] != int64(1) {
		return false, 0, "", fmt.Errorf("reply %v: want {0} or {1, ms, bitmap}", reply)
	}
	ms, ok1 := reply[1].(int64)
	bits, ok2 := reply[2].(string)
	if !ok1 || !ok2 || ms <= 0 {
		return false, 0, "", fmt.Errorf("reply %v: want {1, positive integer, string}", reply)
	}
	return true, time.Duration(ms) * time.Millisecond, bits, nil
}

// claimBit is the claim's bit in the product's bitmap: FNV-1a (64 bits) of the claim key
// claimKeyOf builds without a keyspace, without building it, folded to claimBits. The bitmap's
// own name carries the keyspace, so the bit needs none.
func claimBit(tag string, r domain.Reservation) int {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, s := range [...]string{"idem:order:", tag, ":", string(r.Buyer), ":", string(r.Key)} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	}
	return int((h ^ h>>32) % claimBits)
}

// bitSet reads bit i of a Redis bitmap (SETBIT numbers a byte's bits from the most
// significant); a bitmap shorter than the bit has it clear.
func bitSet(bits string, i int) bool {
	b := i >> 3
	return b < len(bits) && bits[b]&(0x80>>(i&7)) != 0
}
