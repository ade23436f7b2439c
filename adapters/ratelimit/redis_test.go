package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest/redistest"
	"cardshop/adapters/ratelimit"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
)

// standaloneDB is the database the standalone tests use, out of the way of the gate's tests
// (DB 1, which they flush) and of other packages' (DB 0).
const standaloneDB = 2

// redisWindow is the window of the contract on Redis: real time, so long enough that a race of
// 5·limit calls (under -race, on the Cluster) ends well within one interval (400ms).
const redisWindow = 2 * time.Second

// standalone returns a client of the standalone Redis on this package's database.
func standalone(t testing.TB) *redis.Client { return redistest.Standalone(t, standaloneDB) }

// cluster returns a client of the Redis Cluster.
func cluster(t testing.TB) *redis.ClusterClient { return redistest.Cluster(t) }

// redisBackend returns two limiters on two clients of one Redis (two service instances),
// connected once for all the cases.
func redisBackend(t *testing.T, newClient func(testing.TB) redis.UniversalClient, autoPipeline bool) func(*testing.T) backend {
	t.Helper()
	limiter := func() *ratelimit.Redis {
		c := newClient(t)
		l := ratelimit.NewRedis(c)
		if autoPipeline {
			ap, err := redisgate.AutoPipeliner(c)
			if err != nil {
				t.Fatal(err)
			}
			l = l.WithAutoPipeline(ap)
		}
		return l
	}
	be := backend{a: limiter(), b: limiter(), window: redisWindow, wait: time.Sleep, parallel: true}
	return func(*testing.T) backend { return be }
}

func standaloneClient(t testing.TB) redis.UniversalClient { return standalone(t) }
func clusterClient(t testing.TB) redis.UniversalClient    { return cluster(t) }

// The contract on Redis runs in parallel: each case waits out real windows.

func TestRedisContractStandalone(t *testing.T) {
	t.Parallel()
	runContract(t, redisBackend(t, standaloneClient, false))
}

func TestRedisContractCluster(t *testing.T) {
	t.Parallel()
	runContract(t, redisBackend(t, clusterClient, false))
}

// The same contract through the auto-pipeliner (what production uses with
// CARDSHOP_REDIS_AUTOPIPELINE).
func TestRedisContractStandaloneAutoPipeline(t *testing.T) {
	t.Parallel()
	runContract(t, redisBackend(t, standaloneClient, true))
}

func TestRedisContractClusterAutoPipeline(t *testing.T) {
	t.Parallel()
	runContract(t, redisBackend(t, clusterClient, true))
}

// The state is one key per limit key, with the hash tag around the whole key, expiring when
// the TAT passes: an idle key costs nothing.
func TestRedisKeyAndExpiry(t *testing.T) {
	c := standalone(t)
	l := ratelimit.NewRedis(c)
	key := "buyer:" + t.Name() + time.Now().Format(time.RFC3339Nano)
	if got, want := ratelimit.RedisKey(key), "rl:{"+key+"}"; got != want {
		t.Fatalf("RedisKey = %q, want %q", got, want)
	}
	for range 3 {
		if ok, _, err := l.Allow(t.Context(), key, 10, time.Minute); !ok || err != nil {
			t.Fatalf("Allow = %v, %v", ok, err)
		}
	}
	// Three of 10 per minute: the TAT is 18s ahead.
	ttl, err := c.PTTL(t.Context(), ratelimit.RedisKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 17*time.Second || ttl > 18*time.Second {
		t.Fatalf("PTTL %v, want about 18s", ttl)
	}
}

// A key that does not hold a number is an error, never "no limit" or "no requests yet".
func TestRedisGarbageKeyIsAnError(t *testing.T) {
	c := standalone(t)
	key := "garbage:" + time.Now().Format(time.RFC3339Nano)
	if err := c.Set(t.Context(), ratelimit.RedisKey(key), "not a time", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ratelimit.NewRedis(c).Allow(t.Context(), key, 10, time.Minute); err == nil {
		t.Fatal("Allow on a key holding text answered without an error")
	}
}

// An unreachable Redis is domain.ErrUnavailable, which the HTTP edge answers by letting the
// request through.
func TestRedisUnreachableIsUnavailable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ok, _, err := ratelimit.NewRedis(c).Allow(t.Context(), "k", 10, time.Minute)
	if ok || !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Allow = %v, %v; want ErrUnavailable", ok, err)
	}
}

// Two shops on one Redis (standalone and Cluster) under different key prefixes keep their own
// limits for the same limit key: each shop's one request of the window is allowed, and its
// second refused. The state lives under the prefix, outside the hash tag, so on a Cluster it
// sits in the slot of the braces alone.
func TestRedisKeyPrefixKeepsShopsApart(t *testing.T) {
	for name, c := range map[string]redis.UniversalClient{"standalone": standalone(t), "cluster": cluster(t)} {
		t.Run(name, func(t *testing.T) {
			key := "buyer:" + t.Name() + time.Now().Format(time.RFC3339Nano)
			a := ratelimit.NewRedis(c).WithKeyPrefix("shop-a")
			b := ratelimit.NewRedis(c).WithKeyPrefix("shop-b")
			for _, l := range []*ratelimit.Redis{a, b} {
				if ok, _, err := l.Allow(t.Context(), key, 1, time.Minute); !ok || err != nil {
					t.Fatalf("first Allow = %v, %v; want allowed", ok, err)
				}
			}
			for _, l := range []*ratelimit.Redis{a, b} {
				if ok, _, err := l.Allow(t.Context(), key, 1, time.Minute); ok || err != nil {
					t.Fatalf("second Allow = %v, %v; want refused", ok, err)
				}
			}
			for _, shop := range []string{"shop-a", "shop-b"} {
				name := shop + ":" + ratelimit.RedisKey(key)
				if n, err := c.Exists(t.Context(), name).Result(); err != nil || n != 1 {
					t.Fatalf("EXISTS %s = %d, %v; want 1", name, n, err)
				}
				t.Cleanup(func() { _ = c.Del(context.Background(), name).Err() })
			}
			if n, err := c.Exists(t.Context(), ratelimit.RedisKey(key)).Result(); err != nil || n != 0 {
				t.Fatalf("EXISTS %s = %d, %v; want 0: no limit without the prefix", ratelimit.RedisKey(key), n, err)
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				plain, err := cc.ClusterKeySlot(t.Context(), ratelimit.RedisKey(key)).Result()
				if err != nil {
					t.Fatal(err)
				}
				prefixed, err := cc.ClusterKeySlot(t.Context(), "shop-a:"+ratelimit.RedisKey(key)).Result()
				if err != nil || prefixed != plain {
					t.Fatalf("slot with the prefix %d (%v), without %d: the prefix left the hash tag", prefixed, err, plain)
				}
			}
		})
	}
}

// A prefix with a hash tag brace would move the key's slot: the limiter refuses it.
func TestRedisKeyPrefixRefusesBraces(t *testing.T) {
	for _, p := range []string{"{shop}", "shop{", "}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithKeyPrefix(%q) did not panic", p)
				}
			}()
			ratelimit.NewRedis(nil).WithKeyPrefix(p)
		}()
	}
}
