package redisgate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
	"cardshop/lua"
)

// standaloneDB is the database the standalone tests use, out of the way of other packages'
// tests (DB 0); TestFlushedGateIsMissing flushes it.
const standaloneDB = 1

// standalone returns a client of the standalone Redis, or stops the test as RequireService
// says when Redis cannot be reached.
func standalone(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr, DB: standaloneDB})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	porttest.RequireService(t, "Redis "+porttest.RedisAddr, c.Ping(ctx).Err())
	return c
}

// cluster returns a client of the Redis Cluster, or stops the test as RequireService says when
// a master cannot be reached.
func cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(porttest.RedisCluster, ",")})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	porttest.RequireService(t, "Redis Cluster "+porttest.RedisCluster, err)
	return c
}

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
		KeyTTL: 10 * time.Minute, At: time.Now()}
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
		redisgate.ClaimKey(keyless), redisgate.MarkerKey(domain.GateChange{Product: p, Ref: "batch-1"})}
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
		reserve(t, g, r, domain.Reserved)
		script := redis.NewScript(lua.Cancel)
		keys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.ClaimKey(r)}
		for i, want := range []int64{1, 0} {
			n, err := script.Run(t.Context(), c, keys, string(r.OrderNo)).Int64()
			if err != nil || n != want {
				t.Fatalf("cancel.lua run #%d = %d, %v; want %d", i+1, n, err, want)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		}
		wantNoKey(t, c, redisgate.ClaimKey(r))
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
	for _, k := range []string{redisgate.StockKey(p), redisgate.SoldKey(p), redisgate.ClaimKey(r), redisgate.MarkerKey(change)} {
		wantNoKey(t, c, k)
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
			{"1", claim("1")}, // ARGV[3] missing
		} {
			err := reserveScript.Run(t.Context(), c, keys, args...).Err()
			if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "reserve.lua") {
				t.Errorf("reserve.lua %q = %v, want its error reply", args, err)
			}
		}
		wantNoKey(t, c, redisgate.ClaimKey(r))
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Sold: 2})

		marker := redisgate.MarkerKey(domain.GateChange{Product: p, Ref: "bad-args"})
		applyKeys := []string{redisgate.StockKey(p), redisgate.SoldKey(p), marker}
		for _, args := range [][]any{{"1.5", "0", "1000"}, {"1", "x", "1000"}, {"1", "0", "0"}, {"--1", "0", "1000"}, {"1", "0"}} {
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
