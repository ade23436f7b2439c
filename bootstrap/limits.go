package bootstrap

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/ratelimit"
	"cardshop/adapters/redisgate"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// newMemoryLimiter provides the memory adapter set's rate limiter: the limits hold per
// process, on the set's clock.
func newMemoryLimiter(c domain.Clock) webkit.Limiter { return ratelimit.NewMemory(c.Now) }

// newRedisLimiter provides the real adapter set's rate limiter on the gate's Redis client, so
// the limits hold across every instance on that Redis. With CARDSHOP_REDIS_AUTOPIPELINE its
// checks share the gate's auto-pipeliner (go-redis keeps one per client): an order costs two
// limit checks besides the reservation, so under a flash sale they are on the hot path too.
// Its keys live under CARDSHOP_REDIS_PREFIX, as the gate's do: another shop on the same Redis
// keeps its own limits.
func newRedisLimiter(cfg Config, c redis.UniversalClient) (webkit.Limiter, error) {
	l := ratelimit.NewRedis(c).WithKeyPrefix(cfg.RedisPrefix)
	if !cfg.RedisAutoPipeline {
		return l, nil
	}
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		return nil, fmt.Errorf("redis auto-pipeline for the rate limiter: %w", err)
	}
	return l.WithAutoPipeline(ap), nil
}
