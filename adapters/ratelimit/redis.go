package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
	"cardshop/lua"
)

// script is ratelimit.lua. Script.Run sends EVALSHA and falls back to EVAL when the server
// answers NOSCRIPT (an empty script cache: a restart, a failover, SCRIPT FLUSH).
var script = redis.NewScript(lua.RateLimit)

// Redis is a GCRA rate limiter whose state lives in Redis (standalone or Cluster), so every
// service instance on the same Redis shares each limit. One key per limit key, rl:{<key>}: the
// braces are a Cluster hash tag, which keeps the key whole in one slot whatever <key> holds.
// Each Allow is one run of ratelimit.lua, atomic on the server and judged by Redis's clock. It
// is safe for concurrent use.
type Redis struct {
	run redis.Scripter
}

// NewRedis returns a limiter on c, a standalone, failover or Cluster client. It does not own c:
// closing it is the caller's business.
func NewRedis(c redis.UniversalClient) *Redis { return &Redis{run: c} }

// WithAutoPipeline makes Allow run through ap (the client's auto-pipeliner, see
// redisgate.AutoPipeliner): under load, concurrent checks share round trips instead of costing
// a write and a read syscall each, as the gate's reservations do.
func (r *Redis) WithAutoPipeline(ap redis.Scripter) *Redis { r.run = ap; return r }

// redisKey names the Redis key that holds the limit of key.
func redisKey(key string) string { return "rl:{" + key + "}" }

// Allow charges one request to key against limit requests per window, atomically for every
// instance on this Redis. It reports whether the request may go ahead and, when not, how long
// until one would be allowed. A limit below 1 or a window under a microsecond per request is an
// error; every failure to get an answer from Redis wraps domain.ErrUnavailable (the caller
// cannot act differently on "unreachable" and "answered with an error": either way it has no
// verdict).
func (r *Redis) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	interval, burst, err := rate(limit, window)
	if err != nil {
		return false, 0, err
	}
	reply, err := script.Run(ctx, r.run, []string{redisKey(key)}, interval.Microseconds(), burst.Microseconds()).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("redis rate limit: %w: %w", domain.ErrUnavailable, err)
	}
	if len(reply) != 2 || reply[0] != 0 && reply[0] != 1 || reply[1] < 0 {
		return false, 0, fmt.Errorf("redis rate limit: %w: reply %v, want {0 or 1, wait}", domain.ErrUnavailable, reply)
	}
	if reply[0] == 1 {
		return true, 0, nil
	}
	return false, time.Duration(reply[1]) * time.Microsecond, nil
}
