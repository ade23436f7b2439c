package bootstrap

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/memory"
	"cardshop/adapters/ratelimit"
)

func TestMemoryLimiterRunsOnTheSetsClock(t *testing.T) {
	clock := memory.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	l := newMemoryLimiter(clock)
	if ok, _, err := l.Allow(t.Context(), "k", 1, time.Minute); !ok || err != nil {
		t.Fatalf("first Allow = %v, %v", ok, err)
	}
	if ok, _, _ := l.Allow(t.Context(), "k", 1, time.Minute); ok {
		t.Fatal("second Allow within the window allowed")
	}
	clock.Advance(time.Minute)
	if ok, _, err := l.Allow(t.Context(), "k", 1, time.Minute); !ok || err != nil {
		t.Fatalf("Allow a window later = %v, %v", ok, err)
	}
}

// Both ways of building the Redis limiter; neither dials Redis.
func TestRedisLimiter(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	for _, ap := range []bool{false, true} {
		l, err := newRedisLimiter(Config{RedisAutoPipeline: ap}, c)
		if err != nil {
			t.Fatalf("autopipeline %v: %v", ap, err)
		}
		if _, ok := l.(*ratelimit.Redis); !ok {
			t.Fatalf("autopipeline %v: %T, want *ratelimit.Redis", ap, l)
		}
	}
}
