package redisgate_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
)

// The contract holds for a gate under a key prefix, on a standalone Redis and on the Cluster
// (every script finds its keys in one slot with the prefix too).
// Their keys are deleted when they end.
func TestContractPrefixedStandalone(t *testing.T) {
	c := standalone(t)
	t.Cleanup(func() { deleteKeys(t, c, "contract-a:*") })
	g := redisgate.New(c).WithKeyPrefix("contract-a")
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

func TestContractPrefixedCluster(t *testing.T) {
	c := cluster(t)
	t.Cleanup(func() { deleteKeys(t, c, "contract.b:eu-1:*") })
	g := redisgate.New(c).WithKeyPrefix("contract.b:eu-1")
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

// deleteKeys deletes the keys of c matching pattern, one at a time (on a Cluster they lie in
// many slots).
func deleteKeys(t *testing.T, c redis.UniversalClient, pattern string) {
	for _, k := range scanKeys(t, c, pattern) {
		if err := c.Del(context.Background(), k).Err(); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
	}
}

// scanKeys lists the keys matching pattern on every master of c (one, standalone).
func scanKeys(t *testing.T, c redis.UniversalClient, pattern string) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	ctx := context.Background() // also in a cleanup, after t.Context has ended
	switch cc := c.(type) {
	case *redis.ClusterClient:
		err = cc.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, cc)
	default:
		t.Fatalf("no scan for %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// A gate under a prefix writes every key under it: after a cycle through every operation of
// the gate (rules, frozen, rebuild, a keyed reservation with a budget and a coupon, a late
// keyless one, pay, close, an orphan released, a sold-out lease, a fenced rebuild finished and
// one aborted), each key named with the product's hash tag starts with the prefix, the kinds
// the cycle leaves are all there, a gate without the prefix does not know the product, and on
// the Cluster every one of those keys sits in the slot of the bare hash tag.
func TestPrefixedGateWritesOnlyUnderItsPrefix(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		const prefix = "shop-a"
		p := porttest.NewProductID()
		tag := fmt.Sprintf("{%d}", p)
		t.Cleanup(func() { deleteKeys(t, c, "*"+tag+"*") })
		g := redisgate.SyncLeases(redisgate.New(c).WithKeyPrefix(prefix).WithSoldOutLease(time.Minute, nil))
		must := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		rules := domain.SaleRules{EndsAt: time.Now().Add(time.Hour).Truncate(time.Millisecond), BuyerLimit: 5}
		must("set rules", g.SetRules(ctx, p, rules))
		must("freeze", g.SetFrozen(ctx, p, true))
		must("unfreeze", g.SetFrozen(ctx, p, false))
		must("rebuild", g.Rebuild(ctx, p, domain.GateLevels{Stock: 3}))

		reserve := func(r domain.Reservation, want domain.ReserveOutcome) {
			t.Helper()
			res, err := g.Reserve(ctx, r)
			if err != nil || res.Outcome != want {
				t.Fatalf("reserve %s = %+v, %v; want outcome %v", r.OrderNo, res, err, want)
			}
		}
		keyed := func(buyer, key string, no domain.OrderNo, qty int) domain.Reservation {
			return domain.Reservation{Product: p, Buyer: domain.BuyerID(buyer), Key: domain.IdempotencyKey(key),
				Qty: qty, OrderNo: no, Fingerprint: "fp", BuyerCap: 10, BuyerWindow: time.Minute}
		}
		paid := keyed("b1", "k1", "o1", 1)
		paid.Coupon, paid.CouponUses, paid.CouponPerBuyer = "SAVE10", 5, 2
		reserve(paid, domain.Reserved)
		late := domain.Reservation{Product: p, Buyer: "b2", Ref: "late:o2", Qty: 1, OrderNo: "o2", Fingerprint: "fp",
			PaidAt: time.Now()}
		reserve(late, domain.Reserved)

		holds, err := g.Holds(ctx, p, 0, 10)
		must("holds", err)
		lateOf := map[domain.OrderNo]bool{}
		for _, h := range holds {
			lateOf[h.OrderNo] = h.Late
		}
		if len(holds) != 2 || lateOf["o1"] || !lateOf["o2"] {
			t.Fatalf("holds %+v: want o1 on time and o2 late (its claim is a ref under the prefix)", holds)
		}

		// Pay o1: its hold follows the order, its holding count stays with the buyer.
		must("forget", g.Forget(ctx, p, []domain.OrderNo{"o1"}))
		if ok, err := g.Apply(ctx, domain.GateChange{Product: p, Ref: "pay:o1", Buyer: "b1"}); err != nil || !ok {
			t.Fatalf("apply = %v, %v", ok, err)
		}
		// Close o2: the reservation is given back.
		if ok, err := g.Cancel(ctx, late); err != nil || !ok {
			t.Fatalf("cancel = %v, %v", ok, err)
		}
		// An orphan: reserved, its order never written, released by the sweep.
		reserve(keyed("b3", "k3", "o3", 1), domain.Reserved)
		if ok, err := g.ReleaseOrphan(ctx, domain.Hold{Product: p, OrderNo: "o3", Qty: 1}); err != nil || !ok {
			t.Fatalf("release orphan = %v, %v", ok, err)
		}
		// The last two units, then sold out: the gate takes a lease.
		reserve(keyed("b4", "k4", "o4", 2), domain.Reserved)
		reserve(keyed("b5", "k5", "o5", 1), domain.SoldOut)
		if _, err := c.Get(ctx, prefix+":soldout:"+tag).Result(); err != nil {
			t.Fatalf("no lease under the prefix: %v", err)
		}

		_, err = g.BeginRebuild(ctx, p, "token-1", time.Minute)
		must("begin rebuild", err)
		must("finish rebuild", g.FinishRebuild(ctx, p, domain.RebuildPlan{Token: "token-1",
			Levels: domain.GateLevels{Stock: 2, Sold: 1}, Counted: []string{"pay:o1"}, Rules: rules,
			Held:    map[domain.BuyerID]int64{"b1": 1},
			Coupons: domain.CouponCounts{"SAVE10": {Uses: 1, Buyers: map[domain.BuyerID]int64{"b1": 1}}}}))
		_, err = g.BeginRebuild(ctx, p, "token-2", time.Minute)
		must("begin rebuild", err)
		must("abort rebuild", g.AbortRebuild(ctx, p, "token-2"))

		// A late payment's re-reservation after the rebuild: its claim (a ref) stays.
		late.Ref, late.OrderNo = "late:o6", "o6"
		reserve(late, domain.Reserved)

		wantLevels(t, g, p, domain.GateLevels{Stock: 1, Sold: 2})
		if held, err := g.HeldCounts(ctx, p); err != nil || held["b1"] != 1 {
			t.Fatalf("held counts = %v, %v; want b1: 1", held, err)
		}
		if cc, err := g.CouponCounts(ctx, p); err != nil || cc["SAVE10"].Uses != 1 {
			t.Fatalf("coupon counts = %v, %v; want SAVE10 used once", cc, err)
		}
		if _, ok, err := redisgate.New(c).Levels(ctx, p); err != nil || ok {
			t.Fatalf("a gate without the prefix: Levels ok = %v, %v; want the product unknown", ok, err)
		}

		keys := scanKeys(t, c, "*"+tag+"*")
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix+":") {
				t.Errorf("key %q is outside the prefix %q", k, prefix)
			}
		}
		for _, root := range []string{"stock:product:", "sold:product:", "idem:order:", "idem:ref:", "gate:applied:",
			"budget:", "holds:", "holdinfo:", "holdbuyer:", "rules:", "held:", "couponuse:", "couponbuyer:", "soldout:", "claimbits:v1:"} {
			found := false
			for _, k := range keys {
				found = found || strings.HasPrefix(k, prefix+":"+root)
			}
			if !found {
				t.Errorf("no %s%s key after the cycle; keys: %v", prefix+":", root, keys)
			}
		}
		cc, ok := c.(*redis.ClusterClient)
		if !ok {
			return
		}
		want, err := cc.ClusterKeySlot(ctx, tag).Result()
		must("keyslot", err)
		for _, k := range keys {
			if slot, err := cc.ClusterKeySlot(ctx, k).Result(); err != nil || slot != want {
				t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want %d, the slot of %s", k, slot, err, want, tag)
			}
		}
	})
}

// Every key reserve.lua takes, named under a prefix, sits in one slot of the Cluster: the slot
// of the same product without the prefix.
func TestClusterPrefixedProductKeysShareOneSlot(t *testing.T) {
	c := cluster(t)
	ctx := t.Context()
	p := porttest.NewProductID()
	r := newReservation(p, 1)
	plain, _ := redisgate.ReserveArgs(r)
	prefixed, _ := redisgate.PrefixedReserveArgs("shop-b", r)
	want, err := c.ClusterKeySlot(ctx, plain[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range prefixed {
		if !strings.HasPrefix(k, "shop-b:") || k != "shop-b:"+plain[i] {
			t.Errorf("key %d = %q, want %q", i, k, "shop-b:"+plain[i])
		}
		if slot, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || slot != want {
			t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want %d", k, slot, err, want)
		}
	}
}

// A prefix with a hash tag brace would move a product's keys out of their slot: the gate
// refuses it.
func TestKeyPrefixRefusesBraces(t *testing.T) {
	for _, p := range []string{"{shop}", "shop{", "shop}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithKeyPrefix(%q) did not panic", p)
				}
			}()
			redisgate.New(nil).WithKeyPrefix(p)
		}()
	}
}
