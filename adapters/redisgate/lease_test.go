package redisgate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
	"cardshop/lua"
)

// The gate's contract holds with sold-out leases taken (synchronously, so each one is in place
// when the SoldOut that asked for it returns), through the auto-pipeliner as in production.
func TestContractStandaloneSoldOutLease(t *testing.T) {
	c := standalone(t)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	g := redisgate.SyncLeases(redisgate.New(c).WithAutoPipeline(ap).WithSoldOutLease(time.Second, nil))
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

func TestContractClusterSoldOutLease(t *testing.T) {
	c := cluster(t)
	g := redisgate.SyncLeases(redisgate.New(c).WithSoldOutLease(time.Second, nil))
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

// leaseCount counts what the leases did (a redisgate.LeaseObserver).
type leaseCount struct{ answers, granted, refused atomic.Int64 }

func (l *leaseCount) GateLeaseAnswer() { l.answers.Add(1) }
func (l *leaseCount) GateLeaseGrant(ok bool) {
	if ok {
		l.granted.Add(1)
	} else {
		l.refused.Add(1)
	}
}

// scriptCalls counts the scripts a client ran.
type scriptCalls struct{ n atomic.Int64 }

func (s *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// Once Redis answered SoldOut, new orders are answered SoldOut without a round trip; a replay
// of a placed order still reaches Redis and gets its order back.
func TestSoldOutLeaseAnswersWithoutRedis(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		calls := &scriptCalls{}
		c.AddHook(calls)
		obs := &leaseCount{}
		g, p := redisgate.SyncLeases(redisgate.New(c).WithSoldOutLease(time.Second, obs)), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 2})
		first, second := newReservation(p, 2), newReservation(p, 1)
		reserve(t, g, first, domain.Reserved)
		reserve(t, g, second, domain.SoldOut) // Redis answers, and the gate takes a lease
		if obs.granted.Load() != 1 {
			t.Fatalf("leases granted = %d, want 1", obs.granted.Load())
		}
		before := calls.n.Load()
		for range 50 {
			if res := reserve(t, g, newReservation(p, 1), domain.SoldOut); res.Left != 0 {
				t.Fatalf("SoldOut under a lease left %d, want 0", res.Left)
			}
		}
		if n := calls.n.Load() - before; n != 0 || obs.answers.Load() != 50 {
			t.Fatalf("50 new orders under a lease ran %d scripts and %d were answered by the lease; want 0 and 50", n, obs.answers.Load())
		}
		res := reserve(t, g, first, domain.Replayed)
		if res.ExistingOrder != first.OrderNo || calls.n.Load()-before != 1 {
			t.Fatalf("replay under a lease = %+v after %d scripts; want the first order, from Redis", res, calls.n.Load()-before)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 0, Sold: 2})
	})
}

// SoldOutByLease tells, without Redis, exactly what Reserve answers under a lease: true for a
// new key while the lease stands, false for a claimed key (it replays), a keyless or invalid
// reservation, a product without a lease or unknown to the gate, and once the lease ends.
func TestSoldOutByLeaseIsReservesAnswer(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		calls := &scriptCalls{}
		c.AddHook(calls)
		obs := &leaseCount{}
		const period = 300 * time.Millisecond
		g, p := redisgate.SyncLeases(redisgate.New(c).WithSoldOutLease(period, obs)), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 1})
		first := newReservation(p, 1)
		if g.SoldOutByLease(first) {
			t.Fatal("SoldOutByLease before any lease")
		}
		reserve(t, g, first, domain.Reserved)
		reserve(t, g, newReservation(p, 1), domain.SoldOut) // the gate takes a lease
		before, answers := calls.n.Load(), obs.answers.Load()
		keyless := newReservation(p, 1)
		keyless.Key, keyless.Ref = "", "late-1"
		invalid := newReservation(p, 0)
		for _, c := range []struct {
			name string
			r    domain.Reservation
			want bool
		}{
			{"a new key", newReservation(p, 1), true},
			{"the claimed key", first, false},
			{"a keyless reservation", keyless, false},
			{"qty 0", invalid, false},
			{"another product", newReservation(porttest.NewProductID(), 1), false},
		} {
			if got := g.SoldOutByLease(c.r); got != c.want {
				t.Errorf("SoldOutByLease(%s) = %v, want %v", c.name, got, c.want)
			}
		}
		if n := calls.n.Load() - before; n != 0 || obs.answers.Load()-answers != 1 {
			t.Fatalf("SoldOutByLease ran %d scripts and counted %d lease answers; want 0 and 1", n, obs.answers.Load()-answers)
		}
		reserve(t, g, first, domain.Replayed) // what false left to Redis
		time.Sleep(period + 50*time.Millisecond)
		if g.SoldOutByLease(newReservation(p, 1)) {
			t.Fatal("SoldOutByLease after the lease ended")
		}
		if redisgate.New(c).SoldOutByLease(newReservation(p, 1)) {
			t.Fatal("SoldOutByLease on a gate without leases")
		}
	})
}

// A buyer's claim sets its bit in the product's bitmap, which lives at least as long as the
// claim; a keyless reservation (a late payment's) sets none.
func TestClaimSetsItsBit(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 1)
		r.KeyTTL = 90 * time.Second
		reserve(t, g, r, domain.Reserved)
		key := redisgate.ClaimBitsKey(p)
		if bit, err := c.GetBit(t.Context(), key, int64(redisgate.ClaimBit(r))).Result(); err != nil || bit != 1 {
			t.Fatalf("GETBIT %s %d = %d, %v; want 1", key, redisgate.ClaimBit(r), bit, err)
		}
		bits, err := c.Get(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !redisgate.BitSet(bits, redisgate.ClaimBit(r)) {
			t.Fatalf("the gate's reading of the bitmap misses bit %d", redisgate.ClaimBit(r))
		}
		if n := popcount(bits); n != 1 {
			t.Fatalf("bitmap has %d bits set, want 1", n)
		}
		ttl, err := c.PTTL(t.Context(), key).Result() // read first: the claim's, read later, is no longer
		if claimTTL, _ := c.PTTL(t.Context(), redisgate.ClaimKey(r)).Result(); err != nil || ttl < claimTTL {
			t.Fatalf("bitmap PTTL %v (%v) is shorter than the claim's %v", ttl, err, claimTTL)
		}
		// Extended by a tenth more than the claim needs (so that the next claims skip the
		// PEXPIRE), not more: stale bits only make a lease ask Redis, but not for ever.
		if most := r.KeyTTL + r.KeyTTL/10; ttl > most {
			t.Fatalf("bitmap PTTL %v, want at most the claim TTL and a tenth, %v", ttl, most)
		}
		second := newReservation(p, 1)
		second.KeyTTL = r.KeyTTL
		reserve(t, g, second, domain.Reserved)
		if ttl2, _ := c.PTTL(t.Context(), key).Result(); ttl2 > ttl {
			t.Fatalf("bitmap PTTL %v after a second claim, %v before: extended again within its tenth of slack", ttl2, ttl)
		}
		if bits, err = c.Get(t.Context(), key).Result(); err != nil {
			t.Fatal(err)
		}
		late := newReservation(p, 1)
		late.Key, late.Buyer, late.Ref = "", "", "late-"+string(late.OrderNo)
		reserve(t, g, late, domain.Reserved)
		if bits2, _ := c.Get(t.Context(), key).Result(); bits2 != bits {
			t.Fatal("a keyless reservation changed the claim bitmap")
		}
	})
}

func popcount(s string) int {
	n := 0
	for i := 0; i < len(s)*8; i++ {
		if redisgate.BitSet(s, i) {
			n++
		}
	}
	return n
}

// Units given back under a lease are refused to new orders, at this instance (without asking)
// and at any other (Redis is fenced), until the lease ends; a late payment takes them at once.
func TestSoldOutLeaseFencesUnitsGivenBack(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		const period = 300 * time.Millisecond
		g := redisgate.SyncLeases(redisgate.New(c).WithSoldOutLease(period, nil))
		other := redisgate.New(c) // another instance, taking no lease
		p := porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 1})
		reserve(t, g, newReservation(p, 1), domain.Reserved)
		reserve(t, g, newReservation(p, 1), domain.SoldOut)
		returned := time.Now()
		if ok, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "close-1", Stock: 2, Sold: -1}); err != nil || !ok {
			t.Fatalf("Apply = %v, %v", ok, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 2, Sold: 0})
		reserve(t, g, newReservation(p, 1), domain.SoldOut)
		if res := reserve(t, other, newReservation(p, 1), domain.SoldOut); res.Left != 0 {
			t.Fatalf("Redis's SoldOut under the lease left %d, want 0 (nothing is reservable)", res.Left)
		}
		late := newReservation(p, 1)
		late.Key, late.Buyer, late.Ref = "", "", "late-"+string(late.OrderNo)
		reserve(t, other, late, domain.Reserved)
		// The lease ends at most 1.25 periods after it was granted: then the unit left is sold.
		deadline := returned.Add(2 * period)
		for {
			res, err := g.Reserve(t.Context(), newReservation(p, 1))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == domain.Reserved {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the unit given back is still refused %v after it came back: %+v", time.Since(returned), res)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if age := time.Since(returned); age < period/4 {
			t.Logf("the lease ended %v after the return", age)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 0, Sold: 2})
	})
}

// soldOutKeys are soldout.lua's keys for p.
func soldOutKeys(p domain.ProductID) []string {
	return []string{redisgate.StockKey(p), redisgate.FrozenKey(p), redisgate.FenceKey(p), redisgate.RulesKey(p),
		redisgate.SoldOutKey(p), redisgate.ClaimBitsKey(p)}
}

// A lease is granted only where reserve.lua would answer SoldOut to every new order without a
// claim, and never shortened by a later grant.
func TestSoldOutLeaseGrantedOnlyWhenSoldOut(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g := redisgate.New(c)
		script := redis.NewScript(lua.SoldOut)
		grant := func(p domain.ProductID, period string) []any {
			t.Helper()
			reply, err := script.Run(t.Context(), c, soldOutKeys(p), period).Slice()
			if err != nil {
				t.Fatalf("soldout.lua: %v", err)
			}
			return reply
		}
		refused := func(name string, p domain.ProductID) {
			t.Helper()
			if reply := grant(p, "10000"); len(reply) != 1 || reply[0] != int64(0) {
				t.Errorf("%s: soldout.lua = %v, want {0}", name, reply)
			}
			wantNoKey(t, c, redisgate.SoldOutKey(p))
		}
		refused("unknown product", porttest.NewProductID())
		withStock := porttest.NewProductID()
		rebuild(t, g, withStock, domain.GateLevels{Stock: 1})
		refused("stock left", withStock)
		frozen := porttest.NewProductID()
		rebuild(t, g, frozen, domain.GateLevels{Frozen: true})
		refused("frozen", frozen)
		fenced := porttest.NewProductID()
		rebuild(t, g, fenced, domain.GateLevels{})
		if _, err := g.BeginRebuild(t.Context(), fenced, "tok", time.Minute); err != nil {
			t.Fatal(err)
		}
		refused("fenced by a rebuild", fenced)
		early := porttest.NewProductID()
		rebuild(t, g, early, domain.GateLevels{})
		if err := g.SetRules(t.Context(), early, domain.SaleRules{StartsAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		refused("not started", early)
		ending := porttest.NewProductID()
		rebuild(t, g, ending, domain.GateLevels{})
		if err := g.SetRules(t.Context(), ending, domain.SaleRules{EndsAt: time.Now().Add(500 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		refused("sale ends before the lease would", ending)

		p := porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Sold: 3})
		reply := grant(p, "10000")
		if len(reply) != 3 || reply[0] != int64(1) {
			t.Fatalf("soldout.lua on a sold-out product = %v, want {1, ms, bitmap}", reply)
		}
		left := reply[1].(int64)
		if left < 2500 || left > 12500 {
			t.Fatalf("lease of a 10 s period has %d ms left, want 2,500–12,500", left)
		}
		if now := time.Now().UnixMilli(); (now+left)%10000 > 50 && (now+left)%10000 < 9950 {
			t.Errorf("lease ends at %d ms, not at a multiple of the period", now+left)
		}
		if again := grant(p, "1000"); again[0] != int64(1) || again[1].(int64) < left-100 {
			t.Fatalf("a second grant with a shorter period = %v; want the first lease, not shortened (%d ms)", again, left)
		}
		for _, bad := range []string{"0", "-1", "x", "1.5", ""} {
			if err := script.Run(t.Context(), c, soldOutKeys(p), bad).Err(); err == nil {
				t.Errorf("soldout.lua with period %q = nil error, want its error reply", bad)
			}
		}
	})
}

// Many buyers on two instances that take leases, one product whose units come back and go
// again while they buy, and every placed order's key re-sent at random, on either instance:
// a re-sent key is always answered with its order (never SoldOut), each key has at most one
// order, and the gate's counters add up at the end. The leases must have answered some
// requests, and units given back under them must have been sold again, or the race was not run.
func TestSoldOutLeaseNeverHidesAPlacedOrder(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		const period = 50 * time.Millisecond
		obs := &leaseCount{}
		gates := []*redisgate.Gate{redisgate.New(c).WithSoldOutLease(period, obs), redisgate.New(c).WithSoldOutLease(period, obs)}
		p := porttest.NewProductID()
		const stock = 40
		rebuild(t, gates[0], p, domain.GateLevels{Stock: stock})
		ctx, stop := context.WithTimeout(t.Context(), 3*time.Second)
		defer stop()

		var (
			mu       sync.Mutex
			placed   []domain.Reservation
			orders   = map[string]domain.OrderNo{}
			returned atomic.Int64
			hidden   atomic.Int64
			failures = make(chan string, 16)
		)
		fail := func(format string, args ...any) {
			select {
			case failures <- fmt.Sprintf(format, args...):
			default:
			}
		}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for ctx.Err() == nil {
					g := gates[rng.IntN(2)]
					mu.Lock()
					var r domain.Reservation
					replay := len(placed) > 0 && rng.IntN(3) == 0
					if replay {
						r = placed[rng.IntN(len(placed))]
					}
					mu.Unlock()
					if !replay {
						r = newReservation(p, 1)
					}
					res, err := g.Reserve(context.WithoutCancel(ctx), r)
					if err != nil {
						fail("Reserve: %v", err)
						return
					}
					switch {
					case replay && res.Outcome == domain.Replayed && res.ExistingOrder == r.OrderNo:
					case replay:
						hidden.Add(1)
						fail("the re-sent key of order %s was answered %+v", r.OrderNo, res)
					case res.Outcome == domain.Reserved:
						mu.Lock()
						if prev, dup := orders[string(r.Key)]; dup {
							fail("key %s has two orders: %s and %s", r.Key, prev, r.OrderNo)
						}
						orders[string(r.Key)] = r.OrderNo
						placed = append(placed, r)
						mu.Unlock()
					case res.Outcome == domain.SoldOut:
					default:
						fail("a new order was answered %+v", res)
					}
				}
			}()
		}
		// The closer gives units back as expired orders do (their claims stay), a few at a time.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				time.Sleep(time.Duration(5+rand.IntN(40)) * time.Millisecond)
				ok, err := gates[i%2].Apply(context.WithoutCancel(ctx), domain.GateChange{Product: p, Ref: "close-" + strconv.Itoa(i), Stock: 1, Sold: -1})
				if err != nil {
					fail("Apply: %v", err)
					return
				}
				if ok {
					returned.Add(1)
				}
			}
		}()
		wg.Wait()
		close(failures)
		for f := range failures {
			t.Error(f)
		}
		if hidden.Load() > 0 {
			t.Fatalf("%d re-sent keys of placed orders were not answered with their order", hidden.Load())
		}
		l, ok, err := gates[0].Levels(t.Context(), p)
		if err != nil || !ok {
			t.Fatalf("Levels = %v, %v", ok, err)
		}
		if l.Stock+l.Sold != stock || l.Sold != int64(len(orders))-returned.Load() {
			t.Fatalf("levels %+v after %d orders and %d units given back; want sold = orders − given back, stock + sold = %d",
				l, len(orders), returned.Load(), stock)
		}
		if obs.answers.Load() == 0 || obs.granted.Load() == 0 {
			t.Fatalf("leases granted %d, answers under them %d: the race did not exercise the leases", obs.granted.Load(), obs.answers.Load())
		}
		if int64(len(orders)) <= stock {
			t.Fatalf("%d orders on %d units with %d given back: units given back under leases were never sold again", len(orders), stock, returned.Load())
		}
		t.Logf("%d orders, %d units given back, %d leases granted (%d refused), %d answers under a lease",
			len(orders), returned.Load(), obs.granted.Load(), obs.refused.Load(), obs.answers.Load())
	})
}
