package redisgate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/adapters/porttest/redistest"
	"cardshop/adapters/redisgate"
	"cardshop/application"
	"cardshop/domain"
	"cardshop/lua"
)

// standaloneDB is the database the standalone tests use, out of the way of other packages'
// tests (DB 0); TestFlushedGateIsMissing flushes it.
const standaloneDB = 1

// standalone returns a client of the standalone Redis on this package's database.
func standalone(t testing.TB) *redis.Client { return redistest.Standalone(t, standaloneDB) }

// cluster returns a client of the Redis Cluster.
func cluster(t testing.TB) *redis.ClusterClient { return redistest.Cluster(t) }

// onBoth runs f as a subtest against the standalone Redis and against the Cluster.
func onBoth(t *testing.T, f func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) { f(t, standalone(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, cluster(t)) })
}

func TestContractStandalone(t *testing.T) {
	g := redisgate.New(standalone(t))
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

func TestContractCluster(t *testing.T) {
	g := redisgate.New(cluster(t))
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

// The same contract through go-redis's auto-pipeliner (what production uses for Reserve).
func TestContractStandaloneAutoPipeline(t *testing.T) {
	c := standalone(t)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	g := redisgate.New(c).WithAutoPipeline(ap)
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

func TestContractClusterAutoPipeline(t *testing.T) {
	c := cluster(t)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	g := redisgate.New(c).WithAutoPipeline(ap)
	porttest.RunStockGate(t, func(*testing.T) domain.StockGate { return g })
}

func TestTTLsMatchTheMemoryGate(t *testing.T) {
	if redisgate.DefaultKeyTTL != memory.DefaultKeyTTL || redisgate.MarkerTTL != memory.MarkerTTL {
		t.Fatalf("redisgate TTLs (%v, %v) differ from memory's (%v, %v)", redisgate.DefaultKeyTTL,
			redisgate.MarkerTTL, memory.DefaultKeyTTL, memory.MarkerTTL)
	}
}

// newReservation is a fresh buyer's reservation of qty units of p.
func newReservation(p domain.ProductID, qty int) domain.Reservation {
	buyer := domain.BuyerID(fmt.Sprintf("rg-%016x", rand.Uint64()))
	return domain.Reservation{Product: p, Buyer: buyer,
		Key:     domain.IdempotencyKey(fmt.Sprintf("rgk-%016x", rand.Uint64())),
		Qty:     qty,
		OrderNo: domain.NewOrderNo(time.Now(), buyer, rand.Uint64()), Fingerprint: domain.RequestFingerprint(p, qty),
		KeyTTL: 10 * time.Minute}
}

func reserve(t *testing.T, g *redisgate.Gate, r domain.Reservation, want domain.ReserveOutcome) domain.ReserveResult {
	t.Helper()
	res, err := g.Reserve(t.Context(), r)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if res.Outcome != want {
		t.Fatalf("Reserve = %+v, want outcome %d", res, want)
	}
	return res
}

func rebuild(t *testing.T, g *redisgate.Gate, p domain.ProductID, l domain.GateLevels) {
	t.Helper()
	if err := g.Rebuild(t.Context(), p, l); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
}

func wantLevels(t *testing.T, g *redisgate.Gate, p domain.ProductID, want domain.GateLevels) {
	t.Helper()
	got, ok, err := g.Levels(t.Context(), p)
	if err != nil || !ok || got != want {
		t.Fatalf("Levels = %+v (ok %v, err %v), want %+v", got, ok, err, want)
	}
}

func wantNoKey(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	n, err := c.Exists(t.Context(), key).Result()
	if err != nil || n != 0 {
		t.Fatalf("EXISTS %s = %d, %v; want 0", key, n, err)
	}
}

func TestClaimExpires(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		r.KeyTTL = time.Second
		reserve(t, g, r, domain.Reserved)
		retry := r
		retry.OrderNo = domain.NewOrderNo(time.Now(), r.Buyer, rand.Uint64())
		if res := reserve(t, g, retry, domain.Replayed); res.ExistingOrder != r.OrderNo {
			t.Fatalf("replay answered order %s, want %s", res.ExistingOrder, r.OrderNo)
		}
		time.Sleep(1200 * time.Millisecond)
		if res := reserve(t, g, retry, domain.Reserved); res.Left != 6 {
			t.Fatalf("Reserve after the claim expired left %d, want 6", res.Left)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 6, Sold: 4})
	})
}

func TestClaimTTLDefaultsToTenMinutes(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 1)
		r.KeyTTL = 0
		reserve(t, g, r, domain.Reserved)
		ttl, err := c.PTTL(t.Context(), redisgate.ClaimKey(r)).Result()
		if err != nil || ttl <= redisgate.DefaultKeyTTL-time.Minute || ttl > redisgate.DefaultKeyTTL {
			t.Fatalf("claim PTTL = %v, %v; want just under %v", ttl, err, redisgate.DefaultKeyTTL)
		}
	})
}

func TestMarkerKeptSevenDays(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		change := domain.GateChange{Product: p, Ref: fmt.Sprintf("batch-%d", rand.Uint64()), Stock: 3}
		if applied, err := g.Apply(t.Context(), change); err != nil || !applied {
			t.Fatalf("Apply = %v, %v; want true, nil", applied, err)
		}
		ttl, err := c.PTTL(t.Context(), redisgate.MarkerKey(change)).Result()
		if err != nil || ttl <= 6*24*time.Hour || ttl > redisgate.MarkerTTL {
			t.Fatalf("marker PTTL = %v, %v; want more than 6 days, at most %v", ttl, err, redisgate.MarkerTTL)
		}
	})
}

// commandLog records the commands a client sent and how each ended.
type commandLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		line := cmd.Name() + " ok"
		if err != nil && !errors.Is(err, redis.Nil) {
			line = cmd.Name() + " " + strings.Fields(err.Error())[0]
		}
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
		return err
	}
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	l.lines = nil
	return lines
}

// flushScripts empties the script cache of every master, as a restart or a failover to a
// replica that never saw the scripts would.
func flushScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
			return m.ScriptFlush(ctx).Err()
		})
	case *redis.Client:
		err = c.ScriptFlush(t.Context()).Err()
	default:
		t.Fatalf("unexpected client %T", c)
	}
	if err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
}

func TestScriptCacheFlushed(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		log := &commandLog{}
		c.AddHook(log)
		g, p := redisgate.New(c), porttest.NewProductID()
		steps := []struct {
			name string
			run  func() error
		}{
			{"rebuild", func() error { return g.Rebuild(t.Context(), p, domain.GateLevels{Stock: 10}) }},
			{"reserve", func() error {
				res, err := g.Reserve(t.Context(), newReservation(p, 3))
				if err == nil && res.Outcome != domain.Reserved {
					err = fmt.Errorf("outcome %d, want Reserved", res.Outcome)
				}
				return err
			}},
			{"apply", func() error {
				_, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: fmt.Sprint(rand.Uint64()), Stock: 1})
				return err
			}},
			{"cancel", func() error { _, err := g.Cancel(t.Context(), newReservation(p, 1)); return err }},
			{"holds", func() error { _, err := g.Holds(t.Context(), p, 0, 10); return err }},
			{"forget", func() error { return g.Forget(t.Context(), p, []domain.OrderNo{"unknown"}) }},
		}
		for _, s := range steps {
			flushScripts(t, c)
			log.take()
			if err := s.run(); err != nil {
				t.Fatalf("%s after SCRIPT FLUSH: %v", s.name, err)
			}
			// EVALSHA finds no script, EVAL runs (and caches) it. Another test process running the
			// same script in the instant after the flush would spare us the NOSCRIPT; this package
			// runs its tests one at a time.
			if got, want := strings.Join(log.take(), ", "), "evalsha NOSCRIPT, eval ok"; got != want {
				t.Fatalf("%s after SCRIPT FLUSH sent %q, want %q", s.name, got, want)
			}
			if err := s.run(); err != nil {
				t.Fatalf("%s again: %v", s.name, err)
			}
			if got, want := strings.Join(log.take(), ", "), "evalsha ok"; got != want {
				t.Fatalf("%s with the script cached sent %q, want %q", s.name, got, want)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 6, Sold: 6})
	})
}

func TestClusterProductKeysShareOneSlot(t *testing.T) {
	c := cluster(t)
	ctx := t.Context()
	p := porttest.NewProductID()
	r := newReservation(p, 1)
	keyless := r
	keyless.Key, keyless.Ref = "", "order:late_reserve"
	keys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.FrozenKey(p), redisgate.ClaimKey(r),
		redisgate.ClaimKey(keyless), redisgate.MarkerKey(domain.GateChange{Product: p, Ref: "batch-1"}),
		redisgate.HoldsKey(p), redisgate.HoldInfoKey(p), redisgate.BudgetKey(p, r.Buyer), redisgate.CouponUseKey(p),
		redisgate.CouponBuyerKey(p), redisgate.HoldCouponKey(p), redisgate.HoldBuyerKey(p)}
	want, err := c.ClusterKeySlot(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[1:] {
		if slot, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || slot != want {
			t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want %d like %s", k, slot, err, want, keys[0])
		}
	}
}

func TestClusterReservesOnEveryMaster(t *testing.T) {
	c := cluster(t)
	ctx := t.Context()
	products := map[string]domain.ProductID{} // master address -> a product it holds
	for range 1000 {
		p := porttest.NewProductID()
		m, err := c.MasterForKey(ctx, redisgate.StockKey(p))
		if err != nil {
			t.Fatal(err)
		}
		if _, seen := products[m.Options().Addr]; !seen {
			products[m.Options().Addr] = p
		}
	}
	if len(products) < 3 {
		t.Fatalf("products landed on %d masters, want 3: %v", len(products), products)
	}
	g := redisgate.New(c)
	for addr, p := range products {
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		r := newReservation(p, 2)
		if res := reserve(t, g, r, domain.Reserved); res.Left != 3 {
			t.Fatalf("Reserve on %s left %d, want 3", addr, res.Left)
		}
		if ok, err := g.Cancel(ctx, r); err != nil || !ok {
			t.Fatalf("Cancel on %s = %v, %v", addr, ok, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 5})
	}
}

// A client that re-sends the script after a lost reply runs it twice with the same arguments:
// the second run must find its own claim and take nothing.
func TestReserveScriptRerunReplays(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10, Sold: 1})
		r := newReservation(p, 4)
		r.Fingerprint = "odd|fingerprint" // the separator inside a fingerprint survives the round trip
		keys, args := redisgate.ReserveArgs(r)
		script := redis.NewScript(lua.Reserve)
		first, err := script.Run(t.Context(), c, keys, args...).Slice()
		if err != nil || first[0] != int64(1) || first[2] != int64(6) {
			t.Fatalf("first run = %v, %v; want {1, \"\", 6}", first, err)
		}
		second, err := script.Run(t.Context(), c, keys, args...).Slice()
		if err != nil || second[0] != int64(2) || second[2] != int64(6) {
			t.Fatalf("re-run = %v, %v; want Replayed (2) with 6 left", second, err)
		}
		res := reserve(t, g, r, domain.Replayed)
		if res.ExistingOrder != r.OrderNo || res.ExistingFingerprint != r.Fingerprint || res.Left != 6 {
			t.Fatalf("Reserve again = %+v, want Replayed of %s (%s) with 6 left", res, r.OrderNo, r.Fingerprint)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 6, Sold: 5})
	})
}

func TestCancelScriptTwiceReturnsUnitsOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 3)
		r.Coupon, r.CouponUses = "SPRING-10", 5
		reserve(t, g, r, domain.Reserved)
		script := redis.NewScript(lua.Cancel)
		keys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.ClaimKey(r), redisgate.HoldsKey(p),
			redisgate.HoldInfoKey(p), redisgate.FenceKey(p), redisgate.RulesKey(p), redisgate.HeldKey(p), redisgate.HoldBuyerKey(p),
			redisgate.CouponUseKey(p), redisgate.CouponBuyerKey(p), redisgate.HoldCouponKey(p)}
		for i, want := range []int64{1, 0} {
			n, err := script.Run(t.Context(), c, keys, string(r.OrderNo), r.Fingerprint).Int64()
			if err != nil || n != want {
				t.Fatalf("cancel.lua run #%d = %d, %v; want %d", i+1, n, err, want)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		}
		wantNoKey(t, c, redisgate.ClaimKey(r))
		// The coupon's use went back once, and its fields went with it (none is left at 0).
		for _, k := range []string{redisgate.CouponUseKey(p), redisgate.CouponBuyerKey(p), redisgate.HoldCouponKey(p)} {
			wantNoKey(t, c, k)
		}
	})
}

// Redis losing its keys (a restart without persistence, an eviction) must stop sales until the
// gate is rebuilt from the ledger: a missing key is 0, never unlimited.
func TestFlushedGateIsMissing(t *testing.T) {
	c := standalone(t)
	if c.Options().DB != standaloneDB || standaloneDB == 0 {
		t.Fatalf("refusing to FLUSHDB database %d", c.Options().DB)
	}
	g, p := redisgate.New(c), porttest.NewProductID()
	rebuild(t, g, p, domain.GateLevels{Stock: 10, Frozen: false})
	reserve(t, g, newReservation(p, 1), domain.Reserved)
	if err := c.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	r := newReservation(p, 1)
	if res := reserve(t, g, r, domain.GateMissing); res.Left != 0 {
		t.Fatalf("Reserve on a flushed gate = %+v, want GateMissing with 0 left", res)
	}
	if _, ok, err := g.Levels(t.Context(), p); err != nil || ok {
		t.Fatalf("Levels on a flushed gate = ok %v, err %v; want ok false", ok, err)
	}
	change := domain.GateChange{Product: p, Ref: "batch-after-flush", Stock: 5}
	if applied, err := g.Apply(t.Context(), change); err != nil || applied {
		t.Fatalf("Apply on a flushed gate = %v, %v; want false, nil", applied, err)
	}
	for _, k := range []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.ClaimKey(r)} {
		wantNoKey(t, c, k)
	}
	// The change is recorded all the same (the rebuild counts it from the ledger), with the
	// marker's TTL.
	if ttl, err := c.PTTL(t.Context(), redisgate.MarkerKey(change)).Result(); err != nil || ttl <= 0 {
		t.Fatalf("marker of a change applied to a flushed gate: TTL %v, %v; want a live marker", ttl, err)
	}
}

func TestUnreachableRedisIsUnavailable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: 1,
		DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	g, p := redisgate.New(c), porttest.NewProductID()
	r := newReservation(p, 1)
	ops := map[string]func() error{
		"Ping":    func() error { return g.Ping(t.Context()) },
		"Reserve": func() error { _, err := g.Reserve(t.Context(), r); return err },
		"Cancel":  func() error { _, err := g.Cancel(t.Context(), r); return err },
		"Apply": func() error {
			_, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "x", Stock: 1})
			return err
		},
		"Levels":    func() error { _, _, err := g.Levels(t.Context(), p); return err },
		"Rebuild":   func() error { return g.Rebuild(t.Context(), p, domain.GateLevels{Stock: 1}) },
		"SetFrozen": func() error { return g.SetFrozen(t.Context(), p, true) },
		"Holds":     func() error { _, err := g.Holds(t.Context(), p, 0, 10); return err },
		"Forget":    func() error { return g.Forget(t.Context(), p, []domain.OrderNo{r.OrderNo}) },
		"ReleaseOrphan": func() error {
			_, err := g.ReleaseOrphan(t.Context(), domain.Hold{Product: p, OrderNo: r.OrderNo, Qty: 1})
			return err
		},
	}
	for name, op := range ops {
		err := op()
		var opErr *net.OpError
		if !errors.Is(err, domain.ErrUnavailable) || !errors.As(err, &opErr) {
			t.Errorf("%s on an unreachable Redis: err = %v; want one wrapping ErrUnavailable and the dial error", name, err)
		}
	}
}

func TestCancelledContextIsUnavailable(t *testing.T) {
	c := standalone(t)
	g, p := redisgate.New(c), porttest.NewProductID()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := g.Reserve(ctx, newReservation(p, 1))
	if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with a cancelled context: err = %v; want ErrUnavailable and context.Canceled", err)
	}
}

// An answer from Redis that is not "try again later" (here a script's error reply about a
// corrupt counter) is a plain error: retrying would get the same answer.
func TestScriptErrorIsNotUnavailable(t *testing.T) {
	c := standalone(t)
	g, p := redisgate.New(c), porttest.NewProductID()
	if err := c.Set(t.Context(), redisgate.StockKey(p), "lots", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := g.Reserve(t.Context(), newReservation(p, 1))
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "stock is not an integer") {
		t.Fatalf("Reserve on a corrupt stock key: err = %v; want the script's error, not ErrUnavailable", err)
	}
	if _, _, err := g.Levels(t.Context(), p); err == nil || errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Levels on a corrupt stock key: err = %v; want a parse error, not ErrUnavailable", err)
	}
}

func TestInvalidReservationNeverReachesRedis(t *testing.T) {
	// Validation comes first, so a client that cannot connect proves nothing was sent.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	g, p := redisgate.New(c), porttest.NewProductID()
	bad := map[string]func(r *domain.Reservation){
		"qty 0":                 func(r *domain.Reservation) { r.Qty = 0 },
		"qty -1":                func(r *domain.Reservation) { r.Qty = -1 },
		"neither key nor ref":   func(r *domain.Reservation) { r.Key = "" },
		"buyer with a colon":    func(r *domain.Reservation) { r.Buyer = "a:b" },
		"order no with the sep": func(r *domain.Reservation) { r.OrderNo = "1|2" },
		"buyer cap, no window":  func(r *domain.Reservation) { r.BuyerCap, r.BuyerWindow = 5, 0 },
	}
	for name, spoil := range bad {
		r := newReservation(p, 1)
		spoil(&r)
		if _, err := g.Reserve(t.Context(), r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("Reserve with %s: err = %v, want ErrInvalidInput", name, err)
		}
	}
	r := newReservation(p, 1)
	r.Key = ""
	if _, err := g.Cancel(t.Context(), r); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("Cancel with neither key nor ref: err = %v, want ErrInvalidInput", err)
	}
}

func TestClaimNamespacesAreApart(t *testing.T) {
	p := porttest.NewProductID()
	r := newReservation(p, 1)
	r.Buyer, r.Key = "ref", "order-key"
	keyless := r
	keyless.Key, keyless.Ref = "", "ref:order-key"
	byKey, byRef := redisgate.ClaimKey(r), redisgate.ClaimKey(keyless)
	tag := fmt.Sprintf("{%d}", p)
	if byKey != "idem:order:"+tag+":ref:order-key" || byRef != "idem:ref:"+tag+":ref:order-key" {
		t.Fatalf("claim keys = %q, %q", byKey, byRef)
	}
}

// The scripts check their own arguments, so a malformed call (a bug, or someone at redis-cli)
// can never add stock through DECRBY of a negative qty, nor leave half a change behind.
func TestScriptsRejectMalformedArgs(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10, Sold: 2})
		r := newReservation(p, 1)
		keys, good := redisgate.ReserveArgs(r)
		reserveScript := redis.NewScript(lua.Reserve)
		claim := func(qty string) string { return string(r.OrderNo) + "|" + r.Fingerprint + "|" + qty }
		for _, args := range [][]any{
			{"0", claim("0"), good[2]},
			{"-1", claim("-1"), good[2]},
			{"-5", claim("-5"), good[2]},
			{"1.5", claim("1.5"), good[2]},
			{"abc", claim("abc"), good[2]},
			{"", claim(""), good[2]},
			{"01", claim("01"), good[2]},
			{" 1", claim(" 1"), good[2]},
			{"1e3", claim("1e3"), good[2]},
			{"99999999999999999999", claim("99999999999999999999"), good[2]},
			{"1", claim("2"), good[2]},      // the claim would give back another qty
			{"1", "no-separators", good[2]}, // the claim has no order number to match
			{"1", claim("1"), "0"},          // a claim that never expires
			{"1", claim("1"), "-1000"},
			{"1", claim("1")},                                                                 // ARGV[3] missing
			{"1", claim("1"), good[2], "-5", "0", "0"},                                        // a negative hold score
			{"1", claim("1"), good[2], "1.5", "0", "0"},                                       // a fractional hold score
			{"1", claim("1"), good[2], good[3], "-1", "0"},                                    // a negative cap
			{"1", claim("1"), good[2], good[3], "x", "0"},                                     // a cap that is no number
			{"1", claim("1"), good[2], good[3], "5", "0"},                                     // a cap without a window
			{"1", claim("1"), good[2], good[3], "5", "-1"},                                    // a negative window
			{"1", claim("1"), good[2], good[3], "5"},                                          // ARGV[6] missing
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7]},           // the claim bit missing
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], "-1"},     // a negative claim bit
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], "131072"}, // past the bitmap
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], "x"},
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], "", good[8]},    // no rules flag: never "no rules"
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], "2", good[8]},   // an unknown rules flag
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], "L-5", good[8]}, // a late instant that is no number
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], "L1.5", good[8]},
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8]},                     // no coupon arguments
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "", "0"},            // ARGV[12] missing
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "spring", "0", "0"}, // lower case
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "AB", "0", "0"},     // too short
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "A|B-C", "0", "0"},  // the separator
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], strings.Repeat("A", 33), "0", "0"},
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "SPRING", "-1", "0"}, // a negative limit
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "SPRING", "0", "x"},
			{"1", claim("1"), good[2], good[3], good[4], good[5], good[6], good[7], good[8], "SPRING", "1.5", "0"},
		} {
			err := reserveScript.Run(t.Context(), c, keys, args...).Err()
			if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "reserve.lua") {
				t.Errorf("reserve.lua %q = %v, want its error reply", args, err)
			}
		}
		// 16 keys and 12 arguments, or the short form of 4 keys and 3 arguments (no hold, no cap).
		if err := reserveScript.Run(t.Context(), c, keys[:13], good...).Err(); err == nil || !strings.Contains(err.Error(), "reserve.lua") {
			t.Errorf("reserve.lua with 13 keys = %v, want its error reply", err)
		}
		if err := reserveScript.Run(t.Context(), c, keys[:5], good...).Err(); err == nil || !strings.Contains(err.Error(), "reserve.lua") {
			t.Errorf("reserve.lua with 5 keys = %v, want its error reply", err)
		}
		if err := reserveScript.Run(t.Context(), c, keys[:4], good...).Err(); err == nil || !strings.Contains(err.Error(), "reserve.lua") {
			t.Errorf("reserve.lua with 4 keys and 6 arguments = %v, want its error reply", err)
		}
		wantNoKey(t, c, redisgate.ClaimKey(r))
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Sold: 2})

		marker := redisgate.MarkerKey(domain.GateChange{Product: p, Ref: "bad-args"})
		applyKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), marker, redisgate.FenceKey(p), redisgate.RulesKey(p),
			redisgate.HeldKey(p), redisgate.CouponUseKey(p), redisgate.CouponBuyerKey(p)}
		for _, args := range [][]any{{"1.5", "0", "1000"}, {"1", "x", "1000"}, {"1", "0", "0"}, {"--1", "0", "1000"}, {"1", "0"},
			{"1", "0", "1000", "", "0"},                  // no coupon arguments
			{"1", "0", "1000", "", "0", "spring", "-1"},  // a lower-case coupon
			{"1", "0", "1000", "", "0", "SPRING", "1.5"}, // uses that are no integer
			{"1", "0", "1000", "b", "0", "SPR|NG", "-1"}, // the separator in a code
			{"1", "0", "1000", "", "0", "SPRING", "--1"}} {
			err := redis.NewScript(lua.Apply).Run(t.Context(), c, applyKeys, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "apply.lua") {
				t.Errorf("apply.lua %q = %v, want its error reply", args, err)
			}
		}
		wantNoKey(t, c, marker)

		rebuildKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.FrozenKey(p)}
		for _, args := range [][]any{{"x", "0", "0"}, {"1", "0.5", "0"}, {"1", "0", "yes"}, {"1", "0"}} {
			err := redis.NewScript(lua.Rebuild).Run(t.Context(), c, rebuildKeys, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "rebuild.lua") {
				t.Errorf("rebuild.lua %q = %v, want its error reply", args, err)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Sold: 2})

		// The hold scripts: malformed calls change nothing.
		holdKeys := []string{redisgate.HoldsKey(p), redisgate.HoldInfoKey(p), redisgate.HoldBuyerKey(p), redisgate.HoldCouponKey(p)}
		for _, args := range [][]any{{"x", "10"}, {"1.5", "10"}, {"100", "0"}, {"100", "-1"}, {"100"}} {
			err := redis.NewScript(lua.Holds).Run(t.Context(), c, holdKeys, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "holds.lua") {
				t.Errorf("holds.lua %q = %v, want its error reply", args, err)
			}
		}
		if err := redis.NewScript(lua.Forget).Run(t.Context(), c, holdKeys).Err(); err == nil || !strings.Contains(err.Error(), "forget.lua") {
			t.Errorf("forget.lua without order numbers = %v, want its error reply", err)
		}
		held := newReservation(p, 2)
		reserve(t, g, held, domain.Reserved)
		releaseKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.HoldsKey(p), redisgate.HoldInfoKey(p),
			redisgate.ClaimKey(r)} // another claim than the hold's
		if err := redis.NewScript(lua.Release).Run(t.Context(), c, releaseKeys, string(held.OrderNo)).Err(); err == nil ||
			!strings.Contains(err.Error(), "release.lua") {
			t.Errorf("release.lua naming another claim = %v, want its error reply", err)
		}
		cancelKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.ClaimKey(held)} // the old 3 keys
		if err := redis.NewScript(lua.Cancel).Run(t.Context(), c, cancelKeys, string(held.OrderNo)).Err(); err == nil ||
			!strings.Contains(err.Error(), "cancel.lua") {
			t.Errorf("cancel.lua with 3 keys = %v, want its error reply", err)
		}
		if n, err := c.Exists(t.Context(), redisgate.ClaimKey(held)).Result(); err != nil || n != 1 {
			t.Fatalf("the claim after refused scripts: EXISTS = %d, %v; want 1", n, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 4})
		if hs, err := g.Holds(t.Context(), p, 0, 10); err != nil || len(hs) != 1 || hs[0].OrderNo != held.OrderNo {
			t.Fatalf("Holds after refused scripts = %+v, %v; want the one hold", hs, err)
		}

		// finish.lua under its own fence: malformed counts write nothing, the fence stays.
		if _, err := g.BeginRebuild(t.Context(), p, "t", time.Minute); err != nil {
			t.Fatal(err)
		}
		finishKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.FrozenKey(p), redisgate.FenceKey(p),
			redisgate.HoldsKey(p), redisgate.HoldInfoKey(p), redisgate.RulesKey(p), redisgate.HeldKey(p), redisgate.HoldBuyerKey(p),
			redisgate.CouponUseKey(p), redisgate.CouponBuyerKey(p), redisgate.HoldCouponKey(p)}
		head := []any{"t", "100", "0", "0", "1000", "0", "0", "0"}
		for _, tail := range [][]any{
			{"0", "0"},                                  // u missing
			{"0", "0", "1"},                             // a code, uses pair missing
			{"0", "0", "1", "SPRING", "x"},              // uses that are no integer
			{"0", "0", "1", "SPRING", "0"},              // a count of 0 is never written
			{"0", "0", "0", "SPRING|b"},                 // half a pair
			{"0", "0", "0", "SPRING|b", "-1"},           // a negative count
			{"0", "1", "0", "buyer", "1.5"},             // held units that are no integer
			{"1", "0", "0"},                             // an order number missing
			{"0", "-1", "0", "SPRING", "1", "SPRING|b"}, // a negative number of pairs
		} {
			err := redis.NewScript(lua.Finish).Run(t.Context(), c, finishKeys, append(append([]any{}, head...), tail...)...).Err()
			if err == nil || !strings.Contains(err.Error(), "finish.lua") {
				t.Errorf("finish.lua %q = %v, want its error reply", tail, err)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 4})
		wantNoKey(t, c, redisgate.CouponUseKey(p))
		if res := reserve(t, g, newReservation(p, 1), domain.Rebuilding); res.Left != 8 {
			t.Fatalf("Reserve after refused finishes = %+v, want Rebuilding: the fence stands", res)
		}
		if err := g.AbortRebuild(t.Context(), p, "t"); err != nil {
			t.Fatal(err)
		}
	})
}

// What reserve.lua writes for a coupon: one use in all and one of the buyer's, the order's
// coupon for its hold, and nothing at all without a coupon.
func TestCouponKeys(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		plain := newReservation(p, 1)
		reserve(t, g, plain, domain.Reserved)
		for _, k := range []string{redisgate.CouponUseKey(p), redisgate.CouponBuyerKey(p), redisgate.HoldCouponKey(p)} {
			wantNoKey(t, c, k)
		}
		r := newReservation(p, 2)
		r.Coupon, r.CouponUses, r.CouponPerBuyer = "SPRING-10", 10, 2
		reserve(t, g, r, domain.Reserved)
		if n, err := c.HGet(t.Context(), redisgate.CouponUseKey(p), "SPRING-10").Int64(); err != nil || n != 1 {
			t.Fatalf("couponuse = %d, %v; want 1", n, err)
		}
		if n, err := c.HGet(t.Context(), redisgate.CouponBuyerKey(p), "SPRING-10|"+string(r.Buyer)).Int64(); err != nil || n != 1 {
			t.Fatalf("couponbuyer = %d, %v; want 1", n, err)
		}
		if code, err := c.HGet(t.Context(), redisgate.HoldCouponKey(p), string(r.OrderNo)).Result(); err != nil || code != "SPRING-10" {
			t.Fatalf("holdcoupon = %q, %v; want SPRING-10", code, err)
		}
		if err := g.Forget(t.Context(), p, []domain.OrderNo{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		wantNoKey(t, c, redisgate.HoldCouponKey(p))
		if n, err := c.HLen(t.Context(), redisgate.CouponUseKey(p)).Result(); err != nil || n != 1 {
			t.Fatalf("couponuse after Forget: HLEN = %d, %v; want 1 (the use follows the order)", n, err)
		}
	})
}

// What reserve.lua writes for a hold and a budget, and for how long the budget lives: the
// window opens with the first reservation and a later one does not extend it.
func TestHoldAndBudgetKeys(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g, p := redisgate.New(c), porttest.NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		r.BuyerCap, r.BuyerWindow = 5, time.Minute
		before, err := c.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		reserve(t, g, r, domain.Reserved)
		after, err := c.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		score, err := c.ZScore(t.Context(), redisgate.HoldsKey(p), string(r.OrderNo)).Result()
		if ms := int64(score); err != nil || ms < before.UnixMilli() || ms > after.UnixMilli() {
			t.Fatalf("hold score = %v, %v; want Redis's unix ms at the reservation (%d..%d)", score, err,
				before.UnixMilli(), after.UnixMilli())
		}
		info, err := c.HGet(t.Context(), redisgate.HoldInfoKey(p), string(r.OrderNo)).Result()
		if want := "2|" + redisgate.ClaimKey(r); err != nil || info != want {
			t.Fatalf("hold info = %q, %v; want %q", info, err, want)
		}
		used, err := c.Get(t.Context(), redisgate.BudgetKey(p, r.Buyer)).Int64()
		if err != nil || used != 2 {
			t.Fatalf("budget = %d, %v; want 2", used, err)
		}
		first, err := c.PTTL(t.Context(), redisgate.BudgetKey(p, r.Buyer)).Result()
		if err != nil || first <= 50*time.Second || first > time.Minute {
			t.Fatalf("budget PTTL = %v, %v; want just under 1m", first, err)
		}
		time.Sleep(50 * time.Millisecond)
		more := newReservation(p, 1)
		more.Buyer, more.BuyerCap, more.BuyerWindow = r.Buyer, 5, 10*time.Minute
		reserve(t, g, more, domain.Reserved)
		later, err := c.PTTL(t.Context(), redisgate.BudgetKey(p, r.Buyer)).Result()
		if err != nil || later >= first || later <= 0 {
			t.Fatalf("budget PTTL after a second reservation = %v, %v; want below %v (not extended)", later, err, first)
		}
		// A keyless reservation holds under its Ref's claim but does not count against the budget.
		keyless := newReservation(p, 1)
		keyless.Key, keyless.Ref, keyless.BuyerCap, keyless.BuyerWindow = "", "x:8", 1, time.Minute
		reserve(t, g, keyless, domain.Reserved)
		if n, err := c.ZCard(t.Context(), redisgate.HoldsKey(p)).Result(); err != nil || n != 3 {
			t.Fatalf("holds = %d, %v; want 3", n, err)
		}
		info, err = c.HGet(t.Context(), redisgate.HoldInfoKey(p), string(keyless.OrderNo)).Result()
		if want := "1|" + redisgate.ClaimKey(keyless); err != nil || info != want {
			t.Fatalf("keyless hold info = %q, %v; want %q", info, err, want)
		}
		wantNoKey(t, c, redisgate.BudgetKey(p, keyless.Buyer))
	})
}

// The crash end to end on Redis: a reservation made at the gate whose order never reached the
// ledger (memory here) is given back by the sweeper after OrphanAfter, and the buyer's key works
// again.
func TestSweeperReleasesOrphanOnRedis(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		clock := memory.NewFakeClock(time.Now())
		signer, err := paysig.New("redis-orphan-secret-0123456789", paysig.DefaultTolerance)
		if err != nil {
			t.Fatal(err)
		}
		queue := memory.NewDelayQueue(clock)
		t.Cleanup(queue.Close)
		g := redisgate.New(c)
		ledger := memory.NewLedger()
		alerts := memory.NewAlerts(slog.New(slog.DiscardHandler))
		cfg := application.DefaultConfig()
		cfg.ReplayWait = 20 * time.Millisecond
		cfg.OrphanAfter = 1500 * time.Millisecond // aged by Redis's clock, not the fake one
		shop, err := application.New(cfg, application.Deps{Ledger: ledger, Gate: g, Queue: queue,
			Publisher: memory.NewPublisher(), Verifier: signer, Alerter: alerts, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		p, err := shop.Catalogue.CreateProduct(ctx, application.NewProduct{ID: porttest.NewProductID(), Name: "orphan", Price: 100, MaxPerOrder: 5})
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader("CODE-0001\nCODE-0002\nCODE-0003\nCODE-0004\nCODE-0005")); err != nil || rep.Added != 5 {
			t.Fatalf("import: %+v, %v", rep, err)
		}
		placed, err := shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: "bob", Product: p.ID(), Qty: 1, IdempotencyKey: "key-written-1"})
		if err != nil {
			t.Fatal(err)
		}

		// The crash: PlaceOrder's reservation, and then nothing.
		orphan := domain.Reservation{Product: p.ID(), Buyer: "alice", Key: "key-crashed-1", Qty: 3,
			OrderNo: domain.NewOrderNo(clock.Now(), "alice", rand.Uint64()), Fingerprint: domain.RequestFingerprint(p.ID(), 3),
			KeyTTL: cfg.IdempotencyTTL}
		reserve(t, g, orphan, domain.Reserved)
		wantLevels(t, g, p.ID(), domain.GateLevels{Stock: 1, Sold: 4})
		retry := application.PlaceOrder{Buyer: "alice", Product: p.ID(), Qty: 3, IdempotencyKey: "key-crashed-1"}
		if _, err := shop.Sales.PlaceOrder(ctx, retry); !errors.Is(err, domain.ErrRequestInProgress) {
			t.Fatalf("retry while the orphan holds the key: err = %v, want ErrRequestInProgress", err)
		}
		if n, err := shop.Sales.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("sweep before OrphanAfter = %d, %v; want 0", n, err)
		}

		time.Sleep(cfg.OrphanAfter + 100*time.Millisecond)
		if n, err := shop.Sales.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep after OrphanAfter = %d, %v; want 1 released", n, err)
		}
		wantLevels(t, g, p.ID(), domain.GateLevels{Stock: 4, Sold: 1})
		wantNoKey(t, c, redisgate.ClaimKey(orphan))
		if n, err := c.Exists(ctx, redisgate.HoldsKey(p.ID()), redisgate.HoldInfoKey(p.ID())).Result(); err != nil || n != 0 {
			t.Fatalf("hold keys left: %d, %v (the written order's hold is forgotten, the orphan's released)", n, err)
		}
		var kinds []string
		for _, a := range alerts.Alerts() {
			kinds = append(kinds, a.Kind)
		}
		if len(kinds) != 1 || kinds[0] != "orphan_reservation_released" {
			t.Fatalf("alerts %v, want one orphan_reservation_released", kinds)
		}
		again, err := shop.Sales.PlaceOrder(ctx, retry)
		if err != nil || again.Replayed || again.Order.No() == orphan.OrderNo {
			t.Fatalf("retry after the release = %+v, %v; want a new order", again, err)
		}
		rec, err := shop.Catalogue.Reconcile(ctx, p.ID(), false)
		if err != nil || !rec.OK() {
			t.Fatalf("reconcile = %+v, %v; want every check OK (orders %s and %s PENDING)", rec.Checks, err,
				placed.Order.No(), again.Order.No())
		}
	})
}

// BenchmarkReserve measures reservations of one hot product (a flash sale) by parallel buyers
// on the standalone Redis, and reports them per second.
func BenchmarkReserve(b *testing.B) {
	c := standalone(b)
	g, p := redisgate.New(c), porttest.NewProductID()
	if err := g.Rebuild(b.Context(), p, domain.GateLevels{Stock: 1 << 40}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := newReservation(p, 1)
			r.KeyTTL = 30 * time.Second // the claims of a long run go away on their own
			res, err := g.Reserve(context.Background(), r)
			if err != nil || res.Outcome != domain.Reserved {
				b.Errorf("Reserve = %+v, %v", res, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// A reply lost in the network (a TCP proxy swallows it and breaks the connection): go-redis
// re-sends the script on a new connection, the claim answers the second run, and the units
// are taken once — whatever the client finally reports.
func TestLostReplyOverTCPReservesOnce(t *testing.T) {
	standalone(t) // skips or fails as RequireService says when Redis is down
	proxy := netfault.NewProxy(t, porttest.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: standaloneDB, MaxRetries: 3,
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	g := redisgate.New(c)
	ctx := t.Context()
	p := porttest.NewProductID()
	if err := g.Rebuild(ctx, p, domain.GateLevels{Stock: 10}); err != nil {
		t.Fatal(err)
	}
	if err := g.Ping(ctx); err != nil { // load the connection before dropping
		t.Fatal(err)
	}
	replays := 0
	for i := 0; i < 5; i++ {
		r := newReservation(p, 2)
		proxy.DropReplies(1)
		res, err := g.Reserve(ctx, r)
		if err == nil && !(res.Outcome == domain.Reserved || res.Outcome == domain.Replayed && res.ExistingOrder == r.OrderNo) {
			t.Fatalf("reserve after a lost reply: %+v", res)
		}
		if err != nil && !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("reserve after a lost reply: %v", err)
		}
		if err == nil && res.Outcome == domain.Replayed {
			replays++ // the client re-sent the script and the claim answered
		}
		lv, ok, err := g.Levels(ctx, p)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if want := int64(10 - 2*(i+1)); lv.Stock != want || lv.Sold != 10-want {
			t.Fatalf("after %d lost replies: stock %d sold %d, want %d/%d (reserved twice?)", i+1, lv.Stock, lv.Sold, want, 10-want)
		}
	}
	if replays == 0 {
		t.Fatal("no reply was lost and re-sent: the proxy did not inject the fault")
	}
}

// Holds are timed by Redis's clock, so an instance whose clock is ahead (or one whose clock is
// behind, reserving) never makes a young reservation look old: a sweeper ten minutes ahead
// releases nothing that Redis took a moment ago, and releases it once Redis's clock says it is
// OrphanAfter old.
func TestSweeperOnAClockAheadLeavesYoungHolds(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		ahead := memory.NewFakeClock(time.Now().Add(10 * time.Minute))
		signer, err := paysig.New("redis-clock-ahead-secret-0123456789", paysig.DefaultTolerance)
		if err != nil {
			t.Fatal(err)
		}
		queue := memory.NewDelayQueue(ahead)
		t.Cleanup(queue.Close)
		g := redisgate.New(c)
		cfg := application.DefaultConfig()
		cfg.OrphanAfter = time.Second
		shop, err := application.New(cfg, application.Deps{Ledger: memory.NewLedger(), Gate: g, Queue: queue,
			Publisher: memory.NewPublisher(), Verifier: signer, Alerter: memory.NewAlerts(slog.New(slog.DiscardHandler)), Clock: ahead})
		if err != nil {
			t.Fatal(err)
		}
		p, err := shop.Catalogue.CreateProduct(ctx, application.NewProduct{ID: porttest.NewProductID(), Name: "clock", Price: 100, MaxPerOrder: 5})
		if err != nil {
			t.Fatal(err)
		}
		rebuild(t, g, p.ID(), domain.GateLevels{Stock: 5})
		inFlight := newReservation(p.ID(), 2) // another instance's order, still being written
		reserve(t, g, inFlight, domain.Reserved)
		if n, err := shop.Sales.SweepOrphans(ctx); err != nil || n != 0 {
			t.Fatalf("a sweeper 10 min ahead released %d, %v; want 0 (the hold is milliseconds old by Redis's clock)", n, err)
		}
		wantLevels(t, g, p.ID(), domain.GateLevels{Stock: 3, Sold: 2})
		time.Sleep(cfg.OrphanAfter + 100*time.Millisecond)
		if n, err := shop.Sales.SweepOrphans(ctx); err != nil || n != 1 {
			t.Fatalf("the sweep once the hold is OrphanAfter old = %d, %v; want 1", n, err)
		}
		wantLevels(t, g, p.ID(), domain.GateLevels{Stock: 5})
	})
}

// BenchmarkReserveSoldOut measures the sold-out answer's gate call as the service makes it:
// parallel buyers of a sold-out product, through the auto-pipeliner.
func BenchmarkReserveSoldOut(b *testing.B) {
	c := standalone(b)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		b.Fatal(err)
	}
	g, p := redisgate.New(c).WithAutoPipeline(ap), porttest.NewProductID()
	if err := g.Rebuild(b.Context(), p, domain.GateLevels{Stock: 0}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(32) // many requests in flight, as under a flash sale
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := g.Reserve(context.Background(), newReservation(p, 1))
			if err != nil || res.Outcome != domain.SoldOut {
				b.Errorf("Reserve = %+v, %v", res, err)
				return
			}
		}
	})
}

// The reservation's key names built from the gate's cache are those built afresh, for every
// kind of reservation, and products past the cache's bound still get theirs.
func TestCachedKeyNamesAreTheSame(t *testing.T) {
	c := standalone(t)
	g := redisgate.New(c)
	for i := range redisgate.MaxCachedProducts + 10 {
		p := domain.ProductID(int64(i) + 1)
		keyed := newReservation(p, 2)
		keyed.BuyerCap, keyed.BuyerWindow = 3, time.Hour
		ref := domain.Reservation{Product: p, Buyer: "b", Ref: "order-1:7", Qty: 1, OrderNo: "order-1", Fingerprint: "late"}
		for _, r := range []domain.Reservation{keyed, ref} {
			k1, a1 := redisgate.ReserveArgs(r)
			for range 2 { // the first call fills the cache, the second reads it
				k2, a2 := redisgate.CachedReserveArgs(g, r)
				if fmt.Sprint(k1, a1) != fmt.Sprint(k2, a2) {
					t.Fatalf("product %d: cached %v %v, built %v %v", p, k2, a2, k1, a1)
				}
			}
		}
	}
	if n := redisgate.CachedProducts(g); n != redisgate.MaxCachedProducts {
		t.Fatalf("%d products cached, want the bound %d", n, redisgate.MaxCachedProducts)
	}
}

// GateTime tells Redis's own clock: between two TIME calls around it.
func TestGateTimeIsRedisTime(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		g := redisgate.New(c)
		var _ domain.GateClock = g
		before, err := c.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		at, err := g.GateTime(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		after, err := c.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if at.Before(before) || at.After(after) {
			t.Fatalf("GateTime = %v, not between Redis's %v and %v", at, before, after)
		}
	})
}
